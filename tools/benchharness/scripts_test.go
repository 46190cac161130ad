package benchharness

import (
	"context"
	"testing"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// startScripts starts a redis-server with the harness's scripts loaded.
func startScripts(t *testing.T) (*redisServer, shas) {
	t.Helper()
	srv := testredis.Start(t)
	r := &redisServer{addr: srv.Addr(), client: newRedisClient(srv.Addr())}
	t.Cleanup(func() { r.client.Close() })
	s, err := loadScripts(context.Background(), r.client)
	if err != nil {
		t.Fatal(err)
	}
	return r, s
}

// The hash window counts like SW.INCR: the count after adding, over the current bucket
// and the buckets-1 before it; a bucket that has left the window stops counting and
// its field is deleted. The client's clock is an argument, so the test steps it.
func TestHashWindowScript(t *testing.T) {
	r, s := startScripts(t)
	ctx := context.Background()
	const bucket = 6000 // 60 s / 10 buckets
	t0 := int64(1_800_000_000_000) / bucket * bucket
	incr := func(now int64) int64 {
		t.Helper()
		v, err := r.client.EvalSha(ctx, s.hashWindow, []string{"w"}, now, 60000, 10, 1).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i, want := range []int64{1, 2, 3} {
		if got := incr(t0 + int64(i)); got != want {
			t.Fatalf("incr %d in one bucket: %d, want %d", i, got, want)
		}
	}
	if got := incr(t0 + 9*bucket); got != 4 {
		t.Fatalf("nine buckets later: %d, want 4 (the first bucket still in the window)", got)
	}
	if got := incr(t0 + 10*bucket); got != 2 {
		t.Fatalf("ten buckets later: %d, want 2 (the first bucket gone)", got)
	}
	if n := r.client.HLen(ctx, "w").Val(); n != 2 {
		t.Fatalf("%d fields left, want the 2 buckets in the window", n)
	}
	if ttl := r.client.PTTL(ctx, "w").Val().Milliseconds(); ttl <= 0 || ttl > 60000 {
		t.Fatalf("key expires in %d ms, want within the window", ttl)
	}
}

// The sorted-set log counts the events of the last window, one member each.
func TestZsetLogScript(t *testing.T) {
	r, s := startScripts(t)
	ctx := context.Background()
	add := func(now int64, member string) int64 {
		t.Helper()
		v, err := r.client.EvalSha(ctx, s.zsetLog, []string{"z"}, now, 60000, member).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t0 := int64(1_800_000_000_000)
	if add(t0, "a") != 1 || add(t0, "b") != 2 || add(t0+59_999, "c") != 3 {
		t.Fatal("events within a window do not all count")
	}
	if got := add(t0+60_000, "d"); got != 2 {
		t.Fatalf("a window after the first two: %d, want 2 (c and d; a and b left)", got)
	}
}

// The loader leaves a key exactly as the script does after a call in each bucket.
func TestLoaderMatchesScript(t *testing.T) {
	r, s := startScripts(t)
	for _, touches := range []int{1, 10} {
		chk, err := checkLoader(context.Background(), r, s, full60s, touches)
		if err != nil {
			t.Fatal(err)
		}
		if !chk.Same || chk.ScriptFields != touches || chk.ScriptBytes != chk.LoaderBytes {
			t.Fatalf("%d touches: %+v", touches, chk)
		}
	}
}
