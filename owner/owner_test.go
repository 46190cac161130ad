package owner

import (
	"context"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/rpc"
)

const t0 = 1_699_999_200_000

func newOwner() *Owner {
	return New(Config{Self: "me", Store: leaparray.NewStore(), Now: func() int64 { return t0 }, HandoffWait: time.Minute})
}

var sp = leaparray.Spec{WindowMs: 60_000, Buckets: 10}

// A retried Handoff (same sender, same ID) is applied once: a transfer never counts twice.
func TestHandoffAppliedOnce(t *testing.T) {
	o := newOwner()
	h := &rpc.Handoff{From: "old", ID: 7, Counters: []rpc.HandoffCounter{
		{Key: "k", Spec: sp, Buckets: []leaparray.Bucket{{Index: t0 / 6000, Count: 5}}},
	}}
	for i := 0; i < 3; i++ {
		if err := o.Handoff(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.cfg.Store.Count("k", sp, t0); got != 5 {
		t.Fatalf("after three deliveries of one handoff: got %d; want 5", got)
	}
	h2 := *h
	h2.ID = 8 // another chunk from the same sender adds
	if err := o.Handoff(context.Background(), &h2); err != nil {
		t.Fatal(err)
	}
	if got := o.cfg.Store.Count("k", sp, t0); got != 10 {
		t.Fatalf("after a second chunk: got %d; want 10", got)
	}
}

// Ops of a partition gained from a live node wait for its Handoff; a Handoff that came
// before the ring change counts when the change comes.
func TestGateWaitsForTheOldOwner(t *testing.T) {
	o := newOwner()
	o.gate.partitions.Store(271)
	key := "k"
	p := o.gate.partition(key)
	o.gate.expect(p, "old", time.Minute)
	done := make(chan counter.Result, 1)
	go func() {
		res := make([]counter.Result, 1)
		o.Do(context.Background(), []counter.Op{{Kind: counter.Incr, Key: key, Window: 60_000, Buckets: 10, N: 1}}, res)
		done <- res[0]
	}()
	select {
	case r := <-done:
		t.Fatalf("decided before the handoff: %+v", r)
	case <-time.After(50 * time.Millisecond): // proving "not yet" needs a span of time
	}
	if o.gate.released(p, "someone-else") {
		t.Fatal("a handoff from another node ended the wait")
	}
	if !o.gate.released(p, "old") {
		t.Fatal("the old owner's handoff did not end the wait")
	}
	if r := <-done; r.Err != nil || r.Count != 1 {
		t.Fatalf("got %+v; want count 1", r)
	}
	// Early: the handoff arrives first, then the ring change: no wait at all.
	q := (p + 1) % 271
	o.gate.released(q, "old")
	o.gate.expect(q, "old", time.Minute)
	if o.gate.expecting(q, "old") {
		t.Fatal("an early handoff was not taken into account")
	}
}

// A wait ends at its deadline, and a request whose own deadline passes while it waits
// is not decided.
func TestGateDeadlines(t *testing.T) {
	o := newOwner()
	o.gate.partitions.Store(271)
	p := o.gate.partition("k")
	o.gate.expect(p, "old", 30*time.Millisecond)
	res := make([]counter.Result, 1)
	o.Do(context.Background(), []counter.Op{{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}, res)
	if res[0].Err != nil || res[0].Count != 1 {
		t.Fatalf("after the wait ran out: got %+v; want count 1 (served)", res[0])
	}
	o.gate.expect(p, "old", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	o.Do(ctx, []counter.Op{{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}, res)
	if res[0].Err == nil || o.cfg.Store.Count("k", sp, t0) != 1 {
		t.Fatalf("a request past its deadline was decided: %+v", res[0])
	}
}

// expecting reports whether p waits for a Handoff from the node named from.
func (g *gate) expecting(p int, from string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.pending[p]
	return e != nil && e.from == from
}
