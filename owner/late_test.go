package owner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
)

// A node cut off from Redis while its lease of a partition runs out writes that
// partition's deltas late: after the next owner loaded the counter (or, Redis holding
// nothing of the partition yet, created it without a load). The next owner must end up
// counting them: the late writer marks the partition, and the owner reloads it.
func TestLateWriteIsReloadedByTheNextOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written int64 // what a wrote before it was cut off from Redis
	}{{"loaded", 5}, {"load skipped", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRedisServer(t)
			relay := srv.Relay(t)
			stA := openStore(t, relay.URL(), fallback.Config{})
			stB := openStore(t, srv.URL(), fallback.Config{})
			n := net{flush: time.Hour} // a writes when the test says (flushOnce)
			a := n.sole(t, "a", stA)
			n.flush = 0
			b := n.add(t, "b", stB)
			k := "late"
			p := ringOf("a").Partition(k)

			do(a.Owner, incr(k, 5))
			if tc.written > 0 {
				a.flushOnce(context.Background())
				redisIs(t, stB, k, tc.written)
			}
			relay.Cut()
			if r := do(a.Owner, incr(k, 7))[0]; r.Err != nil || r.Count != 12 {
				t.Fatalf("incr on a, cut off from Redis: got %+v; want count 12", r)
			}
			a.lapse(p) // its lease runs out with 12 - written not in Redis

			b.SetRing(ringOf("b"))
			b.leases.grantAll()
			if r := do(b.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != tc.written+1 {
				t.Fatalf("incr on b: got %+v; want count %d (what Redis had, and 1)", r, tc.written+1)
			}

			relay.Heal()
			eventually(t, "a's late write", func() error {
				a.kickFlush()
				if got, err := fallbacktest.Count(context.Background(), stB, k, sp, t0); err != nil || got != 13 {
					return fmt.Errorf("Redis counts %d, %v; want 13", got, err)
				}
				return nil
			})
			countIs(t, b.Owner, k, 13)
		})
	}
}

// Counters handed on directly carry their sender's memory, which may lack a late
// write that landed after the sender loaded them, and whose mark their receiver saw
// before it held them. The receiver reloads them once Redis has what came with them.
func TestHandedCountersAreReloadedAfterALateWrite(t *testing.T) {
	srv := startRedisServer(t)
	relayA, relayB := srv.Relay(t), srv.Relay(t)
	st := openStore(t, srv.URL(), fallback.Config{})
	n := net{flush: time.Hour} // a and c write when the test says (kickFlush)
	a := n.sole(t, "a", openStore(t, relayA.URL(), fallback.Config{}))
	c := n.add(t, "c", st)
	n.flush = 0
	b := n.add(t, "b", openStore(t, relayB.URL(), fallback.Config{}))
	c.SetRing(ringOf("b")) // c holds nothing yet
	k := "late"
	p := ringOf("a").Partition(k)

	do(a.Owner, incr(k, 5))
	a.flushOnce(context.Background())
	relayA.Cut()
	do(a.Owner, incr(k, 7))
	a.lapse(p)
	b.SetRing(ringOf("b"))
	b.leases.grantAll()
	countIs(t, b.Owner, k, 5) // loaded
	relayB.Cut()
	if r := do(b.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 6 {
		t.Fatalf("incr on b, cut off from Redis: got %+v; want count 6", r)
	}

	relayA.Heal() // a writes its 7 late and marks the partition, while c holds nothing
	eventually(t, "a's late write", func() error {
		a.kickFlush()
		if got, err := fallbacktest.Count(context.Background(), st, k, sp, t0); err != nil || got != 12 {
			return fmt.Errorf("Redis counts %d, %v; want 12", got, err)
		}
		return nil
	})
	polls := c.LatePolls()
	eventually(t, "c reads the marks", func() error {
		c.kickFlush()
		if c.LatePolls() < polls+2 {
			return fmt.Errorf("%d polls", c.LatePolls()-polls)
		}
		return nil
	})

	// b hands its counters (6, of which 1 not in Redis) to c directly.
	c.SetRing(ringOf("c"))
	b.SetRing(ringOf("c"))
	eventually(t, "b's release", func() error {
		if b.leases.claimed(p) {
			return fmt.Errorf("b still claims the partition")
		}
		return nil
	})
	c.leases.grantAll() // as the voters do once b no longer claims it
	eventually(t, "c counts what a wrote late", func() error {
		c.kickFlush() // c writes the 1 it was handed with its lease held: on time
		if r := do(c.Owner, count(k))[0]; r.Err != nil || r.Count != 13 {
			return fmt.Errorf("got %d, %v; want 13", r.Count, r.Err)
		}
		return nil
	})
	redisIs(t, st, k, 13)
}
