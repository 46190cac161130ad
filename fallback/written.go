package fallback

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Partition stamps: when each ring partition's counters were last written, so that an
// owner can tell, once per partition, that Redis holds nothing of it in a counter's
// window and create its new counters without a load (owner/loadskip.go). A writer stamps
// a partition before it writes deltas of it (and again at least every so often while
// it keeps writing), so every delta in Redis has a stamp no older than that interval
// before it. The stamps are one hash, a field per partition: a few kB.

// WrittenKey is the hash of the stamps of a ring of n partitions:
// lc:{parts}:written:<n>. Its third part is never a window, so it is no counter's key.
func WrittenKey(n int) string { return "lc:{parts}:written:" + strconv.Itoa(n) }

// StampWritten records that partitions ps (of a ring of n) are written at nowMs (the
// writer's counters' clock, or the start of the newest bucket it writes if that is
// later: the stamp bounds the buckets, placed by the writers' clocks, not Redis's time);
// a stamp never goes back. It returns the stamps' epoch, which is
// newEpoch if Redis held no stamps: a writer that finds an epoch it did not know has
// lost the stamps it made before (Redis was emptied), and stamps again what it writes.
func (st *Store) StampWritten(ctx context.Context, n int, ps []int, nowMs int64, newEpoch string) (string, error) {
	args := make([]any, 0, len(ps)+2)
	args = append(args, nowMs, newEpoch)
	for _, p := range ps {
		args = append(args, p)
	}
	epoch, err := st.runDurable(ctx, call{script: scripts.stamp, keys: []string{WrittenKey(n)}, args: args}).Text()
	if err != nil {
		return "", unavailable("stamp", err)
	}
	return epoch, nil
}

// Written returns when each partition of ps (of a ring of n) was last stamped, ms;
// 0 for one never stamped (or whose stamps Redis lost with the counters).
func (st *Store) Written(ctx context.Context, n int, ps []int) ([]int64, error) {
	fields := make([]string, len(ps))
	for i, p := range ps {
		fields[i] = strconv.Itoa(p)
	}
	var vals []any
	err := st.guard(ctx, func() error {
		var err error
		vals, err = st.rdb.HMGet(ctx, WrittenKey(n), fields...).Result()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, unavailable("written", err)
	}
	out := make([]int64, len(ps))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // nil: never stamped
		}
		if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, unavailable("written", err)
		}
	}
	return out, nil
}

// Epoch returns the partition stamps' epoch (see StampWritten): "" when Redis holds
// none, as after it lost its data. A node that knew another learns that Redis lost
// what it held.
func (st *Store) Epoch(ctx context.Context, n int) (string, error) {
	var e string
	err := st.guard(ctx, func() error {
		var err error
		if e, err = st.rdb.HGet(ctx, WrittenKey(n), "e").Result(); errors.Is(err, redis.Nil) {
			e, err = "", nil
		}
		return err
	})
	if err != nil {
		return "", unavailable("epoch", err)
	}
	return e, nil
}
