package fallback

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// CounterRef names one counter: its key and its shape.
type CounterRef struct {
	Key  string
	Spec leaparray.Spec
}

// journalPush bounds the entries of one RPUSH (a Journal of more sends several, in one
// transaction).
const journalPush = 4096

// Journal appends refs to owner's journal: the counters a node wrote in Redis while
// their owner could not be reached, so that the owner, back, reloads them (TakeJournal).
// The journal is a Redis list at lc:journal:{<owner tag>} (the tag as for counter keys);
// one call is one round trip (MULTI, RPUSH, PEXPIRE, EXEC) however many refs it holds,
// and refreshes the list's TTL to Config.JournalTTL, so the journal of an owner that
// never comes back goes away. Refs are kept as given, duplicates included. A ref with a
// bad Spec fails the call (counter.ErrBadWindow, counter.ErrBadBuckets) before anything
// is written; Redis failures wrap counter.ErrUnavailable.
func (st *Store) Journal(ctx context.Context, owner string, refs []CounterRef) error {
	if len(refs) == 0 {
		return nil
	}
	vals := make([]any, len(refs))
	for i, r := range refs {
		if err := checkSpec(r.Spec); err != nil {
			return fmt.Errorf("fallback: journal ref %d (%q): %w", i, r.Key, err)
		}
		vals[i] = encodeRef(r)
	}
	key := journalKey(owner)
	err := st.guard(ctx, func() error {
		_, err := st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for rest := vals; len(rest) > 0; {
				n := min(len(rest), journalPush)
				p.RPush(ctx, key, rest[:n]...)
				rest = rest[n:]
			}
			p.PExpire(ctx, key, st.cfg.JournalTTL)
			return nil
		})
		return err
	})
	if err != nil {
		return unavailable("journal", err)
	}
	return nil
}

// TakeJournal removes and returns up to max refs from owner's journal, oldest first, in
// one atomic LPOP (Redis 6.2+): two nodes taking the same journal never get the same
// entry. An empty or missing journal gives nil. Entries that are not refs (not written
// by Journal) are dropped. max < 1 is counter.ErrBadArgument.
func (st *Store) TakeJournal(ctx context.Context, owner string, max int) ([]CounterRef, error) {
	if max < 1 {
		return nil, fmt.Errorf("%w: TakeJournal max %d < 1", counter.ErrBadArgument, max)
	}
	var vals []string
	err := st.guard(ctx, func() error {
		var err error
		vals, err = st.rdb.LPopCount(ctx, journalKey(owner), max).Result()
		if err == redis.Nil {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, unavailable("take journal", err)
	}
	var refs []CounterRef
	for _, v := range vals {
		if r, ok := decodeRef(v); ok {
			refs = append(refs, r)
		}
	}
	return refs, nil
}

// encodeRef writes a ref as "<windowMs>:<buckets>:<key>": the key last and as is, so
// any bytes (a ':' too) come back unchanged, and common keys stay readable.
func encodeRef(r CounterRef) string {
	var b strings.Builder
	b.Grow(len(r.Key) + 16)
	b.WriteString(strconv.FormatInt(r.Spec.WindowMs, 10))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(r.Spec.Buckets))
	b.WriteByte(':')
	b.WriteString(r.Key)
	return b.String()
}

func decodeRef(s string) (CounterRef, bool) {
	w, rest, ok1 := strings.Cut(s, ":")
	bk, key, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return CounterRef{}, false
	}
	win, err1 := strconv.ParseInt(w, 10, 64)
	buckets, err2 := strconv.Atoi(bk)
	sp := leaparray.Spec{WindowMs: win, Buckets: buckets}
	if err1 != nil || err2 != nil || checkSpec(sp) != nil {
		return CounterRef{}, false
	}
	return CounterRef{Key: key, Spec: sp}, true
}
