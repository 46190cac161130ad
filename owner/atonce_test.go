package owner

import (
	"testing"

	"github.com/leapcount/leapcount/counter"
)

// tryDo is decideAtOnce of ops, checked as Decide checks them, with fresh results.
func tryDo(o *Owner, ops ...counter.Op) ([]counter.Result, bool) {
	res := make([]counter.Result, len(ops))
	return res, o.tryAtOnce(ops, res)
}

// tryAtOnce is decideAtOnce of ops, checked as Decide checks them.
func (o *Owner) tryAtOnce(ops []counter.Op, res []counter.Result) bool {
	for i := range ops {
		_ = o.cfg.Limits.Ready(&ops[i])
	}
	return o.decideAtOnce(ops, res)
}

// decideAtOnce decides at once only what Do would decide without waiting; whatever it
// refuses, it applies none of the batch.
func TestDecideAtOnceDecidesOnlyWhatNeedsNoWait(t *testing.T) {
	var n net
	a := n.add(t, "a", nil)
	rg := ringOf("a", "b")
	a.SetRing(rg)
	mine, theirs := keysOf(rg, "a", 1)[0], keysOf(rg, "b", 1)[0]
	if _, ok := tryDo(a.Owner, incr(mine, 1)); ok {
		t.Fatal("decideAtOnce decided without the lease; want false")
	}
	a.leases.grantAll()
	if res, ok := tryDo(a.Owner, incr(mine, 2), incr(mine, 3)); !ok || res[1].Err != nil || res[1].Count != 5 {
		t.Fatalf("decideAtOnce with the lease: got %v, %+v; want true, a count of 5", ok, res[1])
	}
	if _, ok := tryDo(a.Owner, incr(mine, 1), incr(theirs, 1)); ok {
		t.Fatal("decideAtOnce decided a batch with another owner's key; want false")
	}
	mustCount(t, a.Owner, mine, 5) // the refused batch applied nothing
	if res, ok := tryDo(a.Owner, counter.Op{Kind: counter.Incr, Key: mine}); !ok || !counter.IsBadInput(res[0].Err) {
		t.Fatalf("decideAtOnce of an invalid op: got %v, %v; want true and its validation error", ok, res[0].Err)
	}
}

// With Redis, a counter not in memory must be loaded first, which waits: decideAtOnce leaves
// it to Do, and decides it once it is in memory.
func TestDecideAtOnceLeavesLoadsToStart(t *testing.T) {
	_, st := startRedis(t)
	var n net
	a := n.sole(t, "a", st)
	if _, ok := tryDo(a.Owner, incr("new", 1)); ok {
		t.Fatal("decideAtOnce decided a counter that needs a load; want false")
	}
	do(a.Owner, incr("new", 1))
	if res, ok := tryDo(a.Owner, incr("new", 1)); !ok || res[0].Count != 2 {
		t.Fatalf("decideAtOnce of a counter in memory: got %v, %+v; want true, a count of 2", ok, res[0])
	}
}
