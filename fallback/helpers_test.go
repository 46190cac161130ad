package fallback

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// testTimeout is the Redis timeouts of test stores: generous, so that no test fails
// because a loaded machine (other tests, -race) kept Redis or the test from answering
// within the production default. Tests about timeouts ask for short ones (shortTimeouts).
const testTimeout = 30 * time.Second

// open starts nothing: it opens a Store on srv's URL (or any URL), closed at the end.
// MinTTL is long so that keys written at test time never expire while a test's own
// clock (now) runs far from the wall clock. Timeouts not set are testTimeout.
func open(t testing.TB, url string, cfg Config) *Store {
	t.Helper()
	cfg.URL = url
	if cfg.MinTTL == 0 {
		cfg.MinTTL = time.Hour
	}
	for _, d := range []*time.Duration{&cfg.DialTimeout, &cfg.ReadTimeout, &cfg.WriteTimeout, &cfg.PoolTimeout} {
		if *d == 0 {
			*d = testTimeout
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// shortTimeouts sets the production default timeouts (DefaultTimeout), for tests about
// what a hung Redis costs.
func shortTimeouts(cfg Config) Config {
	cfg.DialTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.PoolTimeout = DefaultTimeout, DefaultTimeout, DefaultTimeout, DefaultTimeout
	return cfg
}

// startStore starts a redis-server and opens a Store on it.
func startStore(t testing.TB) (*testredis.Server, *Store) {
	t.Helper()
	srv := testredis.Start(t)
	return srv, open(t, srv.URL(), Config{})
}

// ctxStore adapts a Store to conformance.Store.
type ctxStore struct{ st *Store }

var bg = context.Background()

func (c ctxStore) Incr(key string, sp leaparray.Spec, n, now int64) (int64, error) {
	return c.st.Incr(bg, key, sp, n, now)
}

func (c ctxStore) Count(key string, sp leaparray.Spec, now int64) (int64, error) {
	return c.st.Count(bg, key, sp, now)
}

func (c ctxStore) Allow(key string, sp leaparray.Spec, limit, n, now int64) (leaparray.Decision, error) {
	return c.st.Allow(bg, key, sp, limit, n, now)
}

func (c ctxStore) Reset(key string, sp leaparray.Spec, now int64) (bool, error) {
	return c.st.Reset(bg, key, sp, now)
}

func (c ctxStore) Snapshot(key string, sp leaparray.Spec, now int64) ([]leaparray.Bucket, error) {
	return c.st.Load(bg, key, sp, now)
}

func (c ctxStore) Merge(key string, sp leaparray.Spec, buckets []leaparray.Bucket, now int64) error {
	return c.st.Merge(bg, key, sp, buckets, now)
}

// memStore is the in-memory reference the tests compare Redis with: a leaparray.Store
// made without bounds, whose bounded operations (TryIncr, TryAllow, TryReset) then never
// fail, with them under the names and answers of the Store's per-operation methods.
type memStore struct{ *leaparray.Store }

func newMem(opts ...leaparray.Option) memStore { return memStore{leaparray.NewStore(opts...)} }

func (m memStore) Incr(key string, sp leaparray.Spec, n, now int64) int64 {
	return must(m.TryIncr(key, sp, n, now))
}

func (m memStore) Allow(key string, sp leaparray.Spec, limit, n, now int64) leaparray.Decision {
	return must(m.TryAllow(key, sp, limit, n, now))
}

func (m memStore) Reset(key string, sp leaparray.Spec, now int64) bool {
	return must(m.TryReset(key, sp, now))
}

// must is v, and panics on an error: one a store without bounds never returns.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// sendOnce writes deltas in one batch, sent once, under a writer name of st's own: a
// writer is used with one Store (its calls' seqs are the store's).
func sendOnce(st *Store, deltas []Delta) error {
	return st.SendBatch(bg, st.NewBatch(fmt.Sprintf("test-%p", st), deltas))
}

// countAll reads the count of each ref at now, in one pipeline of count scripts.
func countAll(st *Store, refs []CounterRef, now int64) ([]int64, error) {
	calls := make([]call, len(refs))
	for i, r := range refs {
		calls[i] = st.countCall(r.Key, r.Spec, now)
	}
	cmds, _ := st.runAll(bg, calls)
	out := make([]int64, len(refs))
	for i, cmd := range cmds {
		n, err := decodeInt("count", cmd)
		if err != nil {
			return nil, fmt.Errorf("count of %q: %w", refs[i].Key, err)
		}
		out[i] = n
	}
	return out, nil
}

// refsOf names each delta's counter.
func refsOf(deltas []Delta) []CounterRef {
	out := make([]CounterRef, len(deltas))
	for i, d := range deltas {
		out[i] = CounterRef{Key: d.Key, Spec: d.Spec}
	}
	return out
}

func spec(windowMs int64, buckets int) leaparray.Spec {
	return leaparray.Spec{WindowMs: windowMs, Buckets: buckets}
}

// evalshaCalls is how many EVALSHA commands the servers have run since their last
// CONFIG RESETSTAT, from INFO commandstats: what Redis itself counted.
func evalshaCalls(t testing.TB, srvs ...*testredis.Server) int64 {
	t.Helper()
	calls, _ := evalshaStats(t, srvs...)
	return calls
}

// evalshaStats is the EVALSHA calls and the microseconds Redis spent in them.
func evalshaStats(t testing.TB, srvs ...*testredis.Server) (calls, usec int64) {
	t.Helper()
	for _, s := range srvs {
		info, ok := s.Do(t, "INFO", "commandstats").(string)
		if !ok {
			t.Fatalf("INFO commandstats on %s: not a string", s.Addr())
		}
		for _, kv := range strings.Split(infoField(info, "cmdstat_evalsha"), ",") {
			name, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case name != "calls" && name != "usec":
			case err != nil:
				t.Fatalf("cmdstat_evalsha %s=%q: %v", name, v, err)
			case name == "calls":
				calls += n
			default:
				usec += n
			}
		}
	}
	return calls, usec
}

func resetStats(t testing.TB, srvs ...*testredis.Server) {
	t.Helper()
	for _, s := range srvs {
		s.Do(t, "CONFIG", "RESETSTAT")
	}
}

// tripCounter counts the round trips a client makes to run scripts: single EVALSHAs
// and pipelines of them (not the handshakes of new connections).
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// commandCalls is how many times the servers ran the command name (lower case) since
// their last CONFIG RESETSTAT, scripts' calls included, from INFO commandstats.
func commandCalls(t testing.TB, name string, srvs ...*testredis.Server) int64 {
	t.Helper()
	var calls int64
	for _, s := range srvs {
		info, ok := s.Do(t, "INFO", "commandstats").(string)
		if !ok {
			t.Fatalf("INFO commandstats on %s: not a string", s.Addr())
		}
		v, ok := strings.CutPrefix(infoField(info, "cmdstat_"+name), "calls=")
		if !ok {
			continue // never run
		}
		v, _, _ = strings.Cut(v, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("cmdstat_%s calls=%q: %v", name, v, err)
		}
		calls += n
	}
	return calls
}
