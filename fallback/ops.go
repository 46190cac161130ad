package fallback

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// Incr adds n (n <= 0 adds nothing) at time now and returns the count afterwards.
func (st *Store) Incr(ctx context.Context, key string, sp leaparray.Spec, n, now int64) (int64, error) {
	if err := checkSpec(sp); err != nil {
		return 0, err
	}
	return decodeInt("incr", st.run(ctx, st.incrCall(key, sp, n, now)))
}

// Count returns the count at time now; an unknown counter counts 0 and is not created.
func (st *Store) Count(ctx context.Context, key string, sp leaparray.Spec, now int64) (int64, error) {
	if err := checkSpec(sp); err != nil {
		return 0, err
	}
	return decodeInt("count", st.run(ctx, st.countCall(key, sp, now)))
}

// Allow adds n at time now if the count plus n stays within limit, and says what it
// did. A denied allow on an unknown counter does not create it.
func (st *Store) Allow(ctx context.Context, key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error) {
	if err := checkSpec(sp); err != nil {
		return leaparray.Decision{}, err
	}
	return decodeDecision(st.run(ctx, st.allowCall(key, sp, limit, n, now)), sp, limit, now)
}

// Reset forgets the counter and reports whether it existed at now (held and still in its
// window), as leaparray.Store.Reset does.
func (st *Store) Reset(ctx context.Context, key string, sp leaparray.Spec, now int64) (bool, error) {
	if err := checkSpec(sp); err != nil {
		return false, err
	}
	n, err := decodeInt("reset", st.run(ctx, st.resetCall(key, sp, now)))
	return n == 1, err
}

func (st *Store) incrCall(key string, sp leaparray.Spec, n, now int64) call {
	return call{scripts.incr, []string{counterKey(key, sp)},
		[]any{sp.Bucket(now), nonNeg(n), sp.Buckets, st.ttlMs(sp)}}
}

func (st *Store) countCall(key string, sp leaparray.Spec, now int64) call {
	return call{scripts.count, []string{counterKey(key, sp)}, []any{sp.Bucket(now), sp.Buckets}}
}

// allowCall passes limit − n, computed here in int64 (−1 when n > limit), so that the
// script compares the count with it exactly: Lua's doubles cannot hold such numbers.
func (st *Store) allowCall(key string, sp leaparray.Spec, limit, n, now int64) call {
	room := int64(-1)
	if limit, n = nonNeg(limit), nonNeg(n); n <= limit {
		room = limit - n
	}
	return call{scripts.allow, []string{counterKey(key, sp)},
		[]any{sp.Bucket(now), room, n, sp.Buckets, st.ttlMs(sp)}}
}

func (st *Store) resetCall(key string, sp leaparray.Spec, now int64) call {
	return call{scripts.reset, []string{counterKey(key, sp)}, []any{sp.Bucket(now), sp.Buckets}}
}

func decodeInt(op string, cmd *redis.Cmd) (int64, error) {
	v, err := cmd.Int64()
	if err != nil {
		return 0, unavailable(op, err)
	}
	return v, nil
}

// decodeDecision turns allow.lua's {allowed, count, e, k} into a Decision, doing the
// arithmetic Lua's doubles cannot do exactly: remaining = max(0, limit−count) and
// retry_after_ms = (e+k)·L − now.
func decodeDecision(cmd *redis.Cmd, sp leaparray.Spec, limit, now int64) (leaparray.Decision, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return leaparray.Decision{}, unavailable("allow", err)
	}
	if len(v) != 4 {
		return leaparray.Decision{}, unavailable("allow", fmt.Errorf("script answered %d values, want 4", len(v)))
	}
	limit = nonNeg(limit)
	d := leaparray.Decision{Allowed: v[0] == 1, Count: v[1]}
	if d.Count < limit {
		d.Remaining = limit - d.Count
	}
	switch k := v[3]; {
	case d.Allowed:
	case k < 0:
		d.RetryAfterMs = -1
	default:
		d.RetryAfterMs = (v[2]+k)*sp.BucketMs() - now
	}
	return d, nil
}
