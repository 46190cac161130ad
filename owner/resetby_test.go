package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
)

// sendsHeld is a Redis whose write-behind sends carrying a reset are held, while hold
// is set, until the test lets each go (from held): a call on the wire that reaches
// Redis late, after its writer's lease ended.
type sendsHeld struct {
	Redis
	hold *atomic.Bool
	held chan func()
}

func (r sendsHeld) SendBatch(b Batch, done func(error)) {
	if r.hold.Load() && slices.ContainsFunc(b.Unconfirmed(), func(d fallback.Delta) bool { return d.Reset }) {
		r.held <- func() { r.Redis.SendBatch(b, done) }
		return
	}
	r.Redis.SendBatch(b, done)
}

func (f *fakeLeases) setUntil(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = d
}

// resetOnTheWire: a counts 5 of k (written; with first, nothing), then resets k under
// a lease that ends 300 ms later; the reset's write leaves and is held on its way past
// the lease's end. With first, the reset is a's first write: its only reading of
// Redis's clock is its clock watch's (TIME).
func resetOnTheWire(t *testing.T, first bool) (n *net, a, b *testOwner, k string, st *fallback.Store, letGo func()) {
	t.Helper()
	_, st = startRedis(t)
	n = new(net)
	var hold atomic.Bool
	held := make(chan func(), 4)
	n.wrap = func(r Redis) Redis { return sendsHeld{Redis: r, hold: &hold, held: held} }
	a = n.sole(t, "a", st)
	n.wrap = nil
	b = n.add(t, "b", st)
	k = keysOf(ringOf("a", "b"), "b", 1)[0]
	if !first {
		do(a.Owner, incr(k, 5))
		redisIs(t, st, k, 5) // (a's write-behind has read Redis's clock from its replies)
	}
	until := a.cfg.Clock.Since() + 300*time.Millisecond
	a.leases.setUntil(until)
	hold.Store(true)
	if r := do(a.Owner, reset(k))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	var send func()
	select {
	case send = <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("a's reset was not sent")
	}
	return n, a, b, k, st, func() {
		eventually(t, "a's lease over", func() error {
			if a.cfg.Clock.Since() < until+50*time.Millisecond {
				return errors.New("not yet")
			}
			return nil
		})
		hold.Store(false)
		send()
	}
}

// A reset whose write reaches Redis after its writer's lease ended, and after the next
// owner loaded the counter and wrote to it, erases none of what that owner wrote
// (sim seed 143630: the write sent under the lease while Redis was slow). Before its
// deadline, Redis erased b's 2 with a's reset: 0 where b counted 7. The same for a
// reset that is its writer's first write (its deadline from the clock watch's reading
// of Redis's clock: 0 where b counted 2 with the write replies' alone).
func TestAResetReachingRedisAfterItsLeaseErasesNothing(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("first write=%v", first), func(t *testing.T) { resetReachingRedisLate(t, first) })
	}
}

func resetReachingRedisLate(t *testing.T, first bool) {
	_, a, b, k, st, letGo := resetOnTheWire(t, first)
	want := int64(7)
	if first {
		want = 2
	}
	p := ringOf("a", "b").Partition(k)
	a.lapse(p)
	b.SetRing(ringOf("a", "b"))
	b.leases.grantAll()
	if r := do(b.Owner, incr(k, 2))[0]; r.Err != nil || r.Count != want {
		t.Fatalf("incr on b: %+v; want %d (it loads what a wrote)", r, want)
	}
	redisIs(t, st, k, want)
	letGo()
	eventually(t, "a's reset confirmed", func() error {
		a.flushOnce(context.Background())
		if !a.flush.empty() {
			return errors.New("a's write-behind holds deltas")
		}
		return nil
	})
	got, err := fallbacktest.Count(context.Background(), st, k, sp, b.now())
	if err != nil || got != want {
		t.Fatalf("Redis counts %d (%v); want b's %d (what a's late reset erased comes back; nothing b counted goes)", got, err, want)
	}
	mustCount(t, b.Owner, k, want)
}

// A reset that reaches Redis past its deadline while its writer still holds the counter
// (its lease renewed meanwhile) is not applied: the writer, told so, sends it again, and
// Redis ends as memory (without that, Redis stayed at 5).
func TestAResetPastItsDeadlineWhileHeldIsSentAgain(t *testing.T) {
	_, a, _, k, st, letGo := resetOnTheWire(t, false)
	a.leases.setUntil(0) // renewed
	letGo()
	eventually(t, "Redis as a's memory", func() error {
		a.flushOnce(context.Background())
		got, err := fallbacktest.Count(context.Background(), st, k, sp, a.now())
		if err == nil && got != 0 {
			err = fmt.Errorf("Redis counts %d; want a's 0", got)
		}
		return err
	})
	mustCount(t, a.Owner, k, 0)
}

func (o *testOwner) now() int64 { return o.cfg.Now() }
