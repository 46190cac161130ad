package fallback

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// fastBound is how long a call may take while the breaker is open: it must not touch
// the network at all, which ErrRedisDown proves; the bound only catches a call that
// hangs, far above what it takes (microseconds) so that a loaded machine never misses it.
const fastBound = time.Second

// openBreaker calls Ping until the breaker opens (each failing with ErrUnavailable).
func openBreaker(t *testing.T, st *Store) {
	t.Helper()
	testredis.Poll(t, 10*time.Second, "breaker open", func() error {
		if err := st.Ping(bg); !errors.Is(err, counter.ErrUnavailable) {
			t.Fatalf("Ping with Redis gone: %v; want ErrUnavailable", err)
		}
		if st.Healthy() {
			return errors.New("still healthy")
		}
		return nil
	})
}

// wantFast runs every call n times and wants each to fail at once with ErrRedisDown.
func wantFast(t *testing.T, st *Store, n int) {
	t.Helper()
	for range n {
		for name, o := range everyOp(st, 1_700_000_000_000) {
			if !errors.Is(o.err, ErrRedisDown) || !errors.Is(o.err, counter.ErrUnavailable) {
				t.Fatalf("%s with the breaker open: %v; want ErrRedisDown and ErrUnavailable", name, o.err)
			}
			if o.took > fastBound {
				t.Fatalf("%s with the breaker open took %v; want under %v", name, o.took, fastBound)
			}
		}
	}
}

// Redis stopped: after a few failures the breaker opens, OnStateChange hears false, and
// every call fails at once; Redis restarted: a probe after the cool-down closes it and
// OnStateChange hears true. The store leaves no goroutine behind.
func TestBreakerRedisStoppedAndRestarted(t *testing.T) {
	srv := testredis.Start(t)
	before := runtime.NumGoroutine()
	var ch changes
	st := open(t, srv.URL(), Config{BreakerCooldown: 200 * time.Millisecond, OnStateChange: ch.hook})
	if !st.Healthy() {
		t.Fatal("a new store is not healthy")
	}
	srv.Stop()
	for range DefaultBreakerFailures { // refused at once: a short deadline does not hide it
		ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
		err := st.Ping(ctx)
		cancel()
		if !errors.Is(err, counter.ErrUnavailable) {
			t.Fatalf("Ping with Redis stopped: %v; want ErrUnavailable", err)
		}
	}
	if st.Healthy() {
		t.Fatalf("healthy after %d refused calls; want the breaker open", DefaultBreakerFailures)
	}
	wantFast(t, st, 20)
	if got, want := ch.list(), []bool{false}; !slices.Equal(got, want) {
		t.Fatalf("OnStateChange heard %v; want %v", got, want)
	}
	srv.Restart()
	wantWorking(t, st, "restart")
	if !st.Healthy() {
		t.Fatal("store not healthy after Redis came back")
	}
	if got, want := ch.list(), []bool{false, true}; !slices.Equal(got, want) {
		t.Fatalf("OnStateChange heard %v; want %v", got, want)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	testredis.Poll(t, 5*time.Second, "no goroutine left", func() error {
		if n := runtime.NumGoroutine(); n > before {
			return fmt.Errorf("got %d goroutines; want %d", n, before)
		}
		return nil
	})
}

// Redis hung: calls time out until the breaker opens, then fail at once. After the
// cool-down only one call (the probe) waits on the hung server while the others still
// fail at once; the probe failing opens the breaker again. Resumed: the next probe
// closes it.
func TestBreakerRedisHungProbesOnce(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), shortTimeouts(Config{}))
	clk := newFakeClock()
	clk.install(st.br)
	srv.Pause()
	t.Cleanup(srv.Resume)
	for range 2 * DefaultBreakerFailures { // callers in a hurry do not open it
		ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
		err := st.Ping(ctx)
		cancel()
		if !errors.Is(err, counter.ErrUnavailable) || !st.Healthy() {
			t.Fatalf("Ping with a 20ms deadline on a hung Redis: %v, healthy %v; want ErrUnavailable, healthy",
				err, st.Healthy())
		}
	}
	openBreaker(t, st)
	wantFast(t, st, 5)
	clk.add(DefaultBreakerCooldown)
	const calls = 8
	took := make([]time.Duration, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			start := time.Now()
			errs[i] = st.Ping(bg)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	slow := 0
	for i := range calls {
		if !errors.Is(errs[i], counter.ErrUnavailable) {
			t.Fatalf("call %d: %v; want ErrUnavailable", i, errs[i])
		}
		if !errors.Is(errs[i], ErrRedisDown) {
			slow++ // the probe
		} else if took[i] > fastBound {
			t.Fatalf("call %d refused by the breaker took %v; want under %v", i, took[i], fastBound)
		}
	}
	if slow != 1 {
		t.Fatalf("%d calls went to Redis after the cool-down (took %v); want 1, the probe", slow, took)
	}
	wantFast(t, st, 1) // the failed probe opened it again
	srv.Resume()
	clk.add(DefaultBreakerCooldown)
	wantWorking(t, st, "resume")
}

// Errors that are not Redis being unreachable (a script failing on a key of the wrong
// type, bad input, a cancelled context) never open the breaker.
func TestBreakerIgnoresErrorReplies(t *testing.T) {
	srv, st := startStore(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	srv.Do(t, "SET", counterKey("str", sp), "x")
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for range 3 * DefaultBreakerFailures {
		if _, err := st.Incr(bg, "str", sp, 1, now); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("Incr on a string key: %v; want WRONGTYPE", err)
		}
		if err := sendOnce(st, []Delta{{Key: "str", Spec: sp, Buckets: []leaparray.Bucket{{Index: 1, Count: 1}}}}); err == nil {
			t.Fatal("a batch on a string key succeeded")
		}
		if _, err := st.Incr(bg, "k", spec(10, 3), 1, now); !errors.Is(err, counter.ErrBadBuckets) {
			t.Fatalf("Incr with a bad spec: %v; want ErrBadBuckets", err)
		}
		if _, err := st.Incr(cancelled, "k", sp, 1, now); !errors.Is(err, context.Canceled) {
			t.Fatalf("Incr with a cancelled context: %v; want context.Canceled", err)
		}
	}
	if !st.Healthy() {
		t.Fatal("breaker opened on errors that are not Redis being down")
	}
	if _, err := st.Incr(bg, "k", sp, 1, now); err != nil {
		t.Fatal(err)
	}
}

// With the breaker open a flush fails every delta at once, each named in the
// FlushError, so the caller keeps them all for the next flush.
func TestBreakerOpenFlushFailsEveryDelta(t *testing.T) {
	srv, st := startStore(t)
	srv.Stop()
	openBreaker(t, st)
	sp := spec(10_000, 10)
	var deltas []Delta
	for i := range 3000 {
		deltas = append(deltas, Delta{Key: fmt.Sprint("k", i), Spec: sp, Buckets: []leaparray.Bucket{{Index: 5, Count: 1}}})
	}
	deltas[7].Reset = true
	start := time.Now()
	err := sendOnce(st, deltas)
	if took := time.Since(start); took > 10*fastBound {
		t.Fatalf("a batch with the breaker open took %v; want under %v", took, 10*fastBound)
	}
	var fe *FlushError
	if !errors.As(err, &fe) || len(fe.Failed) != len(deltas) || !errors.Is(err, ErrRedisDown) {
		t.Fatalf("a batch with the breaker open: %v; want all %d deltas failed with ErrRedisDown", err, len(deltas))
	}
	for k, i := range fe.Failed {
		if i != k {
			t.Fatalf("Failed[%d] = %d; want %d (every delta, in order)", k, i, k)
		}
	}
}
