package fallback

import (
	"context"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// open starts nothing: it opens a Store on srv's URL (or any URL), closed at the end.
// MinTTL is long so that keys written at test time never expire while a test's own
// clock (now) runs far from the wall clock.
func open(t testing.TB, url string, cfg Config) *Store {
	t.Helper()
	cfg.URL = url
	if cfg.MinTTL == 0 {
		cfg.MinTTL = time.Hour
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

func spec(windowMs int64, buckets int) leaparray.Spec {
	return leaparray.Spec{WindowMs: windowMs, Buckets: buckets}
}
