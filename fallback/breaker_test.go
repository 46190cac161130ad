package fallback

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a breaker clock moved by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time              { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)         { c.ns.Add(int64(d)) }
func newFakeClock() *fakeClock                   { c := &fakeClock{}; c.ns.Store(1e18); return c }
func (c *fakeClock) install(b *breaker) *breaker { b.now = c.now; return b }

// changes records what OnStateChange heard.
type changes struct {
	mu  sync.Mutex
	got []bool
}

func (c *changes) hook(healthy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, healthy)
}

func (c *changes) list() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func mustAdmit(t *testing.T, b *breaker, wantProbe bool) {
	t.Helper()
	probe, ok := b.admit()
	if !ok || probe != wantProbe {
		t.Fatalf("admit() = probe %v, ok %v; want probe %v, ok true", probe, ok, wantProbe)
	}
}

func mustRefuse(t *testing.T, b *breaker) {
	t.Helper()
	if _, ok := b.admit(); ok {
		t.Fatal("admit() let a call through; want it refused")
	}
}

// The state machine: failures in a row open it, a success in between resets the count,
// neutral calls change nothing; open refuses until the cool-down, then lets one probe
// through; a failed probe opens it for another cool-down, a good one closes it.
func TestBreakerStates(t *testing.T) {
	clk := newFakeClock()
	var ch changes
	b := clk.install(newBreaker(Config{BreakerFailures: 3, BreakerCooldown: time.Second, OnStateChange: ch.hook}))
	fail := func() { mustAdmit(t, b, false); b.settle(false, unreached) }
	fail()
	fail()
	mustAdmit(t, b, false)
	b.settle(false, reached) // resets the count
	fail()
	fail()
	mustAdmit(t, b, false)
	b.settle(false, neutral) // a cancelled call says nothing
	if !b.healthy() {
		t.Fatal("breaker opened after 2 failures in a row; want it closed until 3")
	}
	fail()
	if b.healthy() {
		t.Fatal("breaker closed after 3 failures in a row; want it open")
	}
	mustRefuse(t, b)
	clk.add(999 * time.Millisecond)
	mustRefuse(t, b)
	clk.add(time.Millisecond)
	mustAdmit(t, b, true) // the probe
	mustRefuse(t, b)      // only one
	b.settle(true, unreached)
	mustRefuse(t, b) // another cool-down
	clk.add(time.Second)
	mustAdmit(t, b, true)
	b.settle(true, neutral) // a cancelled probe: the next call probes
	mustAdmit(t, b, true)
	b.settle(true, reached)
	if !b.healthy() {
		t.Fatal("breaker open after a good probe; want it closed")
	}
	mustAdmit(t, b, false)
	if got, want := ch.list(), []bool{false, true}; !slices.Equal(got, want) {
		t.Fatalf("OnStateChange heard %v; want %v", got, want)
	}
}

// BreakerFailures < 0: the breaker never opens.
func TestBreakerDisabled(t *testing.T) {
	b := newBreaker(Config{BreakerFailures: -1, BreakerCooldown: time.Second})
	for range 100 {
		mustAdmit(t, b, false)
		b.settle(false, unreached)
	}
	if !b.healthy() {
		t.Fatal("a disabled breaker opened")
	}
}

// OnStateChange runs outside the lock (it may call the breaker) and calls never
// overlap; a change made while it runs is delivered after, so the last call tells the
// current state.
func TestBreakerNotifyReentrant(t *testing.T) {
	clk := newFakeClock()
	var b *breaker
	var ch changes
	var inside atomic.Int32
	hook := func(healthy bool) {
		if inside.Add(1) != 1 {
			t.Error("OnStateChange calls overlap")
		}
		defer inside.Add(-1)
		ch.hook(healthy)
		if b.healthy() != healthy { // would deadlock under the lock
			t.Errorf("OnStateChange(%v) while healthy() = %v", healthy, !healthy)
		}
		if !healthy { // Redis comes back while the node logs "degraded"
			clk.add(time.Second)
			mustAdmit(t, b, true)
			b.settle(true, reached)
		}
	}
	b = clk.install(newBreaker(Config{BreakerFailures: 1, BreakerCooldown: time.Second, OnStateChange: hook}))
	mustAdmit(t, b, false)
	b.settle(false, unreached)
	// the recovery made inside the hook is delivered by the same goroutine, after it
	if got, want := ch.list(), []bool{false, true}; !slices.Equal(got, want) {
		t.Fatalf("OnStateChange heard %v; want %v", got, want)
	}
	if !b.healthy() {
		t.Fatal("breaker open; want closed")
	}
}

// Many goroutines failing and succeeding at once: the hook hears alternating states,
// never overlapping, ending with the breaker's state.
func TestBreakerConcurrentNotify(t *testing.T) {
	var ch changes
	var inside atomic.Int32
	b := newBreaker(Config{BreakerFailures: 1, BreakerCooldown: time.Nanosecond, OnStateChange: func(h bool) {
		if inside.Add(1) != 1 {
			t.Error("OnStateChange calls overlap")
		}
		ch.hook(h)
		inside.Add(-1)
	}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if probe, ok := b.admit(); ok {
					v := unreached
					if (i+g)%3 == 0 {
						v = reached
					}
					b.settle(probe, v)
				}
			}
		})
	}
	wg.Wait()
	got := ch.list()
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Fatalf("OnStateChange heard %v twice in a row (at %d of %d)", got[i], i, len(got))
		}
	}
	if len(got) > 0 && got[len(got)-1] != b.healthy() {
		t.Fatalf("last heard %v; breaker healthy() = %v", got[len(got)-1], b.healthy())
	}
}
