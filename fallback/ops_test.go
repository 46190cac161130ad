package fallback

import (
	"context"
	"embed"
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// The per-operation methods below (Incr, Count, Allow, Reset) run leaparray.Store's
// operations on a Redis counter, one script call each (testdata/ops: common.lua, then
// ops.lua, then the operation's own file). Production never calls them: it writes
// through Batch and reads through LoadMany. They are the reference the tests hold Redis's
// counters to leaparray's with (conformance_test.go, exact_test.go), a way to put
// counts in Redis and read them back, and the baseline the benchmarks compare
// write-behind with.

//go:embed testdata/ops/*.lua
var opsFS embed.FS

// opScripts holds one script per operation.
var opScripts = func() struct{ incr, count, allow, reset *redis.Script } {
	read := func(name string) string {
		b, err := opsFS.ReadFile("testdata/ops/" + name + ".lua")
		if err != nil {
			panic(err) // the files are embedded: a missing one is a build mistake
		}
		return string(b)
	}
	mk := func(name string) *redis.Script { return withCommon(read("ops"), read(name)) }
	return struct{ incr, count, allow, reset *redis.Script }{mk("incr"), mk("count"), mk("allow"), mk("reset")}
}()

// The store loads them with its own, so that the pipelined paths (runAll) find them
// after a restart or a SCRIPT FLUSH as they find the store's.
func init() {
	loaded = append(loaded, opScripts.incr, opScripts.count, opScripts.allow, opScripts.reset)
}

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
// window), as leaparray.Store's TryReset does.
func (st *Store) Reset(ctx context.Context, key string, sp leaparray.Spec, now int64) (bool, error) {
	if err := checkSpec(sp); err != nil {
		return false, err
	}
	n, err := decodeInt("reset", st.run(ctx, st.resetCall(key, sp, now)))
	return n == 1, err
}

func (st *Store) incrCall(key string, sp leaparray.Spec, n, now int64) call {
	return call{script: opScripts.incr, keys: []string{counterKey(key, sp)}, args: []any{sp.Bucket(now), nonNeg(n), sp.Buckets, st.ttlMs(sp)}}
}

func (st *Store) countCall(key string, sp leaparray.Spec, now int64) call {
	return call{script: opScripts.count, keys: []string{counterKey(key, sp)}, args: []any{sp.Bucket(now), sp.Buckets}}
}

// allowCall passes limit − n, computed here in int64 (−1 when n > limit), so that the
// script compares the count with it exactly: Lua's doubles cannot hold such numbers.
func (st *Store) allowCall(key string, sp leaparray.Spec, limit, n, now int64) call {
	room := int64(-1)
	if limit, n = nonNeg(limit), nonNeg(n); n <= limit {
		room = limit - n
	}
	return call{script: opScripts.allow, keys: []string{counterKey(key, sp)}, args: []any{sp.Bucket(now), room, n, sp.Buckets, st.ttlMs(sp)}}
}

func (st *Store) resetCall(key string, sp leaparray.Spec, now int64) call {
	return call{script: opScripts.reset, keys: []string{counterKey(key, sp)}, args: []any{sp.Bucket(now), sp.Buckets}}
}

func nonNeg(v int64) int64 { return max(v, 0) }

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

// Merge and Load below are one counter at a time what production does for many:
// write-behind merges through a Batch (applied once), a new owner loads through LoadMany.

// Merge adds buckets to the counter bucket by bucket, creating it if needed, as
// leaparray.Store.Merge does: buckets older than the counter's window at its head are
// dropped. Merging is additive: merging the same buckets twice counts them twice (a
// Batch applies at most once). now is not used by the merge rule (it does not depend on
// the time); it is taken so that every write has the caller's clock at hand.
func (st *Store) Merge(ctx context.Context, key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error {
	d := Delta{Key: key, Spec: sp, Buckets: buckets}
	if err := checkDelta(d); err != nil {
		return err
	}
	if len(buckets) == 0 {
		return nil // nothing to add, as for an empty snapshot in memory
	}
	r, err := mergeReply(st.run(ctx, st.mergeCall(d)), 1)
	if err == nil {
		err = r.errs[0]
	}
	if err != nil {
		return unavailable("merge", err)
	}
	return nil
}

// mergeCall is merge_many's call for one delta, without a writer key: applied each time
// it runs.
func (st *Store) mergeCall(d Delta) call {
	return call{script: scripts.mergeMany, keys: []string{counterKey(d.Key, d.Spec)}, args: st.appendDelta([]any{0, 0, 0}, d)}
}

// Load returns the counter's buckets within the window at time now (max(bucket(now),
// head)), oldest first and non-zero only, as leaparray.Store.Snapshot does; nil if the
// counter is unknown. A new owner of a counter loads it with this.
func (st *Store) Load(ctx context.Context, key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	if err := checkSpec(sp); err != nil {
		return nil, err
	}
	var fields map[string]string
	err := st.guard(ctx, func() error {
		var err error
		fields, err = st.rdb.HGetAll(ctx, counterKey(key, sp)).Result()
		return err
	})
	if err != nil {
		return nil, unavailable("load", err)
	}
	return windowOf(fields, sp, now)
}
