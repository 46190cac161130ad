package owner

import (
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
)

func borrowOp(key string, limit, ask int64) counter.Op {
	return counter.Op{Kind: counter.Borrow, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets, N: 1, Limit: limit, Ask: ask}
}

func returnOp(key string, id uint64, n int64) counter.Op {
	return counter.Op{Kind: counter.Return, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets, N: n, SliceID: id}
}

// A slice is counted when it is lent, ends with its bucket, shrinks as the limit nears
// and never takes the last units; its unspent part is taken back once, and only by the
// return that names it.
func TestSlicesAreCountedWhenLentAndTakenBackOnce(t *testing.T) {
	var n net
	n.clock.Store(t0 + 5_000) // a bucket is 6 s: 1 s of this one is left
	a := n.add(t, "a", nil)
	a.SetRing(ringOf("a"))
	a.leases.grantAll()
	const key, limit = "hot", 160

	r := do(a.Owner, borrowOp(key, limit, 100))[0]
	if r.Err != nil || !r.Allowed || r.Count != 1 || r.Lent == nil {
		t.Fatalf("borrow: got %+v (lent %+v); want allowed at count 1 with a slice", r, r.Lent)
	}
	if want := int64((limit - limit/sliceKeep - 1) / sliceShare); r.Lent.N != want {
		t.Errorf("slice of %d; want %d (an eighth of what is left above the part kept)", r.Lent.N, want)
	}
	if r.Lent.TTL != time.Second {
		t.Errorf("slice lives %v; want 1s, the rest of the bucket it is counted in", r.Lent.TTL)
	}
	lent := r.Lent
	mustCount(t, a.Owner, key, 1+lent.N)
	if got := a.SlicesOut(); got != 1 {
		t.Errorf("%d slices out; want 1", got)
	}

	for _, wrong := range []counter.Op{returnOp("other", lent.ID, 3), returnOp(key, lent.ID+1, 3), returnOp(key, lent.ID, lent.N+1)} {
		if r := do(a.Owner, wrong)[0]; r.Err != nil || r.Existed || r.Count != 0 {
			t.Errorf("return %+v: got %+v; want nothing taken", wrong, r)
		}
	}
	mustCount(t, a.Owner, key, 1+lent.N)
	if r := do(a.Owner, returnOp(key, lent.ID, 5))[0]; r.Err != nil || !r.Existed || r.Count != 5 {
		t.Fatalf("return of 5: got %+v; want 5 taken", r)
	}
	mustCount(t, a.Owner, key, 1+lent.N-5)
	if r := do(a.Owner, returnOp(key, lent.ID, 5))[0]; r.Err != nil || r.Existed || r.Count != 0 {
		t.Fatalf("the same return again: got %+v; want nothing taken", r)
	}
	mustCount(t, a.Owner, key, 1+lent.N-5)

	// Borrow until nothing more is lent: slices shrink, and the last units stay.
	last := lent.N
	for i := 0; ; i++ {
		r := do(a.Owner, borrowOp(key, limit, 1000))[0]
		if r.Lent == nil {
			break
		}
		if r.Lent.N > last {
			t.Errorf("slice %d holds %d, more than the one before (%d)", i, r.Lent.N, last)
		}
		last = r.Lent.N
		if i > limit {
			t.Fatal("slices never stop")
		}
	}
	c := do(a.Owner, count(key))[0].Count
	if c > limit-limit/sliceKeep {
		t.Errorf("count %d after lending all it would; want at most %d (the last %d kept)", c, limit-limit/sliceKeep, limit/sliceKeep)
	}
	for c < limit {
		if r := do(a.Owner, borrowOp(key, limit, 1000))[0]; !r.Allowed || r.Lent != nil {
			t.Fatalf("at count %d: got %+v (lent %+v); want allowed, no slice", c, r, r.Lent)
		}
		c++
	}
	if r := do(a.Owner, borrowOp(key, limit, 1000))[0]; r.Allowed || r.Lent != nil {
		t.Fatalf("at the limit: got %+v; want denied, no slice", r)
	}
}

// A slice ends no later than the lease lets the owner decide, and none is lent when
// less than minSliceTTL is left; a return is not taken once the partition's memory
// changed since the slice was lent.
func TestSlicesEndWithTheLeaseAndTheMemory(t *testing.T) {
	var n net
	n.clock.Store(t0)
	a := n.add(t, "a", nil)
	rg := ringOf("a")
	a.SetRing(rg)
	a.leases.grantAll()
	before := a.cfg.Clock.Since()
	a.leases.until = before + 700*time.Millisecond
	r := do(a.Owner, borrowOp("k", 1000, 50))[0]
	after := a.cfg.Clock.Since()
	if r.Lent == nil {
		t.Fatalf("got %+v; want a slice", r)
	}
	if r.Lent.TTL > a.leases.until-before || r.Lent.TTL < a.leases.until-after {
		t.Errorf("slice lives %v, lent between %v and %v; want to the lease's end (%v)", r.Lent.TTL, before, after, a.leases.until)
	}
	a.leases.until = a.cfg.Clock.Since() + minSliceTTL/2
	if r := do(a.Owner, borrowOp("k", 1000, 50))[0]; !r.Allowed || r.Lent != nil {
		t.Errorf("with %v of the lease left: got %+v (lent %+v); want allowed, no slice", minSliceTTL/2, r, r.Lent)
	}

	a.leases.until = 0
	r = do(a.Owner, borrowOp("j", 1000, 50))[0]
	if r.Lent == nil {
		t.Fatalf("got %+v; want a slice", r)
	}
	held := do(a.Owner, count("j"))[0].Count
	a.bumpGen(rg.Partition("j"))
	if r := do(a.Owner, returnOp("j", r.Lent.ID, 1))[0]; r.Existed || r.Count != 0 {
		t.Errorf("return after the partition's memory changed: got %+v; want nothing taken", r)
	}
	mustCount(t, a.Owner, "j", held)
}

// A counter with short buckets (a per-second limit's are 100 ms) is lent slices for as
// long as a fifth of its bucket is left, not minSliceTTL: a slice ends with its bucket,
// and none of such a counter's would ever have been lent.
func TestShortBucketsAreLentSlices(t *testing.T) {
	var n net
	n.clock.Store(t0 + 30) // 70 ms of a 100 ms bucket left
	a := n.add(t, "a", nil)
	a.SetRing(ringOf("a"))
	a.leases.grantAll()
	perSecond := counter.Op{Kind: counter.Borrow, Key: "s", Window: 1000, Buckets: 10, N: 1, Limit: 1000, Ask: 50}
	r := do(a.Owner, perSecond)[0]
	if r.Lent == nil || r.Lent.TTL != 70*time.Millisecond {
		t.Fatalf("with 70 ms of a 100 ms bucket left: got %+v (lent %+v); want a slice of 70ms", r, r.Lent)
	}
	n.clock.Store(t0 + 85) // 15 ms left: less than a fifth
	if r := do(a.Owner, perSecond)[0]; !r.Allowed || r.Lent != nil {
		t.Errorf("with 15 ms of a 100 ms bucket left: got %+v (lent %+v); want allowed, no slice", r, r.Lent)
	}
}

// bumpGen starts a new generation of p's Record, as counters handed in do.
func (o *Owner) bumpGen(p int) { o.do(func() { o.step(p, Event{Kind: CountersIn}) }) }

// An ask alone (a Borrow of nothing, sent beside an incr judged by a limit) lends while
// the count is within the limit, and adds nothing but the slice.
func TestAnAskAloneLendsWithinTheLimit(t *testing.T) {
	var n net
	n.clock.Store(t0)
	a := n.add(t, "a", nil)
	a.SetRing(ringOf("a"))
	a.leases.grantAll()
	do(a.Owner, incr("k", 10))
	ask := borrowOp("k", 100, 50)
	ask.N = 0
	r := do(a.Owner, ask)[0]
	if r.Err != nil || !r.Allowed || r.Count != 10 || r.Lent == nil {
		t.Fatalf("an ask at count 10 of 100: %+v (lent %+v); want allowed, count 10, a slice", r, r.Lent)
	}
	mustCount(t, a.Owner, "k", 10+r.Lent.N)
	do(a.Owner, incr("k", 200))
	if r := do(a.Owner, ask)[0]; r.Allowed || r.Lent != nil {
		t.Fatalf("an ask past the limit: %+v; want denied, no slice", r)
	}
}
