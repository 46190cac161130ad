package owner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// A node whose store holds twice its bound refuses a Handoff; the sender keeps the
// counters, still claiming their partitions, and sends them again until the receiver
// has room: nothing handed over is lost to a full store.
func TestFullReceiverRefusesHandoffUntilRoom(t *testing.T) {
	var n net
	a := n.sole(t, "a", nil)
	n.bounds = &leaparray.Bounds{MaxUnits: 10}
	b := n.add(t, "b", nil)
	two := ringOf("a", "b")
	moving := keysOf(two, "b", 10)
	for _, k := range moving {
		do(a.Owner, incr(k, 3))
	}
	short := leaparray.Spec{WindowMs: 1000, Buckets: 10}
	for i := range 15 { // b's own, past its cap (as handed-over state may be): 15 + 10 > 2×10
		b.cfg.Store.Merge(fmt.Sprint("own", i), short, []leaparray.Bucket{{Index: short.Bucket(t0), Count: 1}})
	}
	b.SetRing(two)
	a.SetRing(two)
	eventually(t, "b refused the handoff", func() error {
		if n.refused.Load() == 0 {
			return errors.New("none refused yet")
		}
		return nil
	})
	if !a.leases.claimed(two.Partition(moving[0])) {
		t.Fatal("a stopped claiming a partition whose counters b refused")
	}
	if got := b.cfg.Store.Len(); got != 15 {
		t.Fatalf("b holds %d counters after refusing; want its own 15", got)
	}
	// b's own counters leave their window and are swept: room for the handoff.
	b.cfg.Store.Sweep(t0+1000, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.WaitReleased(ctx); err != nil {
		t.Fatal(err)
	}
	b.leases.grantAll()
	for _, k := range moving {
		mustCount(t, b.Owner, k, 3)
	}
}

// With Redis, a counter loaded into a full store is a new counter there like any other:
// the op on it fails with ErrFull (its state stays in Redis), and is decided once there
// is room.
func TestLoadIntoFullStoreFails(t *testing.T) {
	_, st := startRedis(t)
	if err := writeElsewhere(st, "in-redis", 3, t0); err != nil {
		t.Fatal(err)
	}
	n := net{bounds: &leaparray.Bounds{MaxUnits: 1}}
	a := n.sole(t, "a", st)
	if r := do(a.Owner, incr("held", 1))[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := do(a.Owner, count("in-redis"))[0]; !errors.Is(r.Err, counter.ErrFull) {
		t.Fatalf("count of a counter in Redis, memory full: got %+v; want ErrFull", r)
	}
	if r := do(a.Owner, reset("held"))[0]; r.Err != nil || !r.Existed {
		t.Fatalf("reset: got %+v; want existed", r)
	}
	mustCount(t, a.Owner, "in-redis", 3)
}
