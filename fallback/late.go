package fallback

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Late-write marks. A node whose lease of a partition ended before Redis confirmed its
// deltas of it (it was cut off, paused, or Redis was down while its lease ran out) wrote
// them late: the partition's next owner may have loaded those counters, or created them
// without a load (owner/loadskip.go), before the deltas landed, and its memory lacks them.
// The writer marks the partition once its write is confirmed; every owner polls the
// marks (one HGET while nothing changes) and reloads from Redis the partitions it holds
// whose mark moved. The marks are one hash, a field per marked partition.

// LateKey is the hash of the late-write marks of a ring of n partitions:
// lc:{parts}:late:<n>. Its third part is never a window, so it is no counter's key.
func LateKey(n int) string { return "lc:{parts}:late:" + strconv.Itoa(n) }

// lateSeq is LateKey's field that counts every mark.
const lateSeq = "seq"

// MarkLate marks partitions ps (of a ring of n) as written late.
func (st *Store) MarkLate(ctx context.Context, n int, ps []int) error {
	args := make([]any, len(ps))
	for i, p := range ps {
		args[i] = p
	}
	if err := st.runDurable(ctx, call{script: scripts.late, keys: []string{LateKey(n)}, args: args}).Err(); err != nil {
		return unavailable("mark late", err)
	}
	return nil
}

// LateMarks returns the marks' sequence and, when it is not since, every partition's
// mark (nil when it is: nothing changed). A Redis that lost the marks (emptied) has
// sequence 0 and no marks.
func (st *Store) LateMarks(ctx context.Context, n int, since int64) (int64, map[int]int64, error) {
	var seq int64
	var all map[string]string
	err := st.guard(ctx, func() error {
		var err error
		if seq, err = st.rdb.HGet(ctx, LateKey(n), lateSeq).Int64(); errors.Is(err, redis.Nil) {
			seq, err = 0, nil
		}
		if err != nil || seq == since {
			return err
		}
		all, err = st.rdb.HGetAll(ctx, LateKey(n)).Result()
		return err
	})
	if err != nil {
		return 0, nil, unavailable("late marks", err)
	}
	if seq == since {
		return seq, nil, nil
	}
	if v, ok := all[lateSeq]; ok {
		seq, _ = strconv.ParseInt(v, 10, 64) // the marks' own: one may have come in between
	}
	marks := make(map[int]int64, len(all))
	for f, v := range all {
		p, perr := strconv.Atoi(f)
		m, merr := strconv.ParseInt(v, 10, 64)
		if perr != nil || merr != nil {
			continue // "seq", or a field this version does not write
		}
		marks[p] = m
	}
	return seq, marks, nil
}
