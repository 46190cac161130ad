package borrow

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
)

type fakeClock struct{ now time.Duration }

func (c *fakeClock) Now() time.Duration { return c.now }

func allowOp(key string, limit int64) counter.Op {
	return counter.Op{Kind: counter.Allow, Key: key, Window: 60_000, Buckets: 10, N: 1, Limit: limit}
}

func newBorrower(t *testing.T, clk *fakeClock, hot int) *Borrower {
	t.Helper()
	b, err := New(Config{Now: clk.Now, HotAfter: hot})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A counter is asked a slice for once it is hot, once at a time; the slice is spent
// where the allows arrive, marked as such, until it is used up; then the counter is
// asked for again.
func TestASliceIsAskedForHotCountersAndSpent(t *testing.T) {
	clk := &fakeClock{}
	b := newBorrower(t, clk, 3)
	op := allowOp("k", 100)
	for i := 0; i < 2; i++ {
		if ask := b.Ask(&op); ask != 0 {
			t.Fatalf("forward %d asked %d; want none before the counter is hot", i+1, ask)
		}
	}
	ask := b.Ask(&op)
	if ask != 3 {
		t.Fatalf("third forward asked %d; want 3 (the forwards seen this period)", ask)
	}
	if again := b.Ask(&op); again != 0 {
		t.Fatalf("asked again (%d) while a Borrow is out", again)
	}
	b.Got(&op, clk.now, counter.Result{Allowed: true, Count: 10, Lent: &counter.Lent{ID: 7, N: 2, TTL: time.Second}})
	for i := int64(1); i <= 2; i++ {
		res, from, ok := b.Spend(&op)
		if !ok || from != 7 || !res.Allowed || !res.Sliced || res.Count != 10+i || res.Remaining != 90-i {
			t.Fatalf("spend %d: got %+v, %v; want allowed, sliced, count %d", i, res, ok, 10+i)
		}
	}
	if _, _, ok := b.Spend(&op); ok {
		t.Fatal("spent past the slice")
	}
	if other := allowOp("k", 50); b.Ask(&other) == 0 {
		// (a different limit is another counter here: it is not hot yet)
	} else {
		t.Fatal("a different limit was asked for before it was hot")
	}
	if due := b.Due(); len(due) != 0 {
		t.Errorf("a slice spent whole gives back %+v; want nothing", due)
	}
	if b.Ask(&op) == 0 {
		t.Error("a hot counter whose slice is spent was not asked for again")
	}
}

// A counter whose buckets are shorter than a period (a per-second limit's are 100 ms)
// is asked a bucket's worth, not a period's: its slice ends with its bucket.
func TestShortBucketsAskABucketsWorth(t *testing.T) {
	clk := &fakeClock{}
	b := newBorrower(t, clk, 20)
	op := counter.Op{Kind: counter.Allow, Key: "k", Window: 1000, Buckets: 10, N: 1, Limit: 1000}
	var ask int64
	for i := 0; i < 20; i++ {
		ask = b.Ask(&op)
	}
	if ask != 2 {
		t.Fatalf("the 20th forward in a period asked %d; want 2, the demand of a 100 ms bucket", ask)
	}
}

// A counter decided from its slice is as hot as the allows that arrive for it: when
// the slice is spent in a later period, the next forward asks again at once, for as
// many as arrived. (Counting forwards alone, it had cooled while its slice lasted: the
// next slice came only after half of HotAfter forwards more, and held only those.)
func TestASlicedCounterStaysHot(t *testing.T) {
	clk := &fakeClock{}
	b := newBorrower(t, clk, 10)
	op := allowOp("k", 1000)
	var ask int64
	for i := 0; i < 10; i++ {
		ask = b.Ask(&op)
	}
	if ask != 10 {
		t.Fatalf("tenth forward asked %d; want 10", ask)
	}
	b.Got(&op, clk.now, counter.Result{Allowed: true, Count: 10, Lent: &counter.Lent{ID: 1, N: 30, TTL: 10 * time.Second}})
	clk.now += 1500 * time.Millisecond // the next period
	for i := 0; i < 30; i++ {
		if _, _, ok := b.Spend(&op); !ok {
			t.Fatalf("spend %d of a live slice of 30 failed", i+1)
		}
	}
	if _, _, ok := b.Spend(&op); ok {
		t.Fatal("spent past the slice")
	}
	if ask := b.Ask(&op); ask != 31 {
		t.Fatalf("the forward after the slice was spent asked %d; want 31 (30 decided from the slice this period, and itself)", ask)
	}
}

// A slice ends early on this node's clock by the rate allowance, after which nothing is
// spent from it and its unspent part is given back; a return whose outcome is unknown
// goes again, a bounded number of times.
func TestASliceEndsAndItsRestIsGivenBack(t *testing.T) {
	clk := &fakeClock{now: time.Hour}
	b := newBorrower(t, clk, 1)
	op := allowOp("k", 100)
	if b.Ask(&op) == 0 {
		t.Fatal("no ask")
	}
	sent := clk.now
	clk.now += 50 * time.Millisecond // the answer takes its time: the slice counts from the ask
	b.Got(&op, sent, counter.Result{Allowed: true, Count: 1, Lent: &counter.Lent{ID: 9, N: 10, TTL: time.Second}})
	if _, _, ok := b.Spend(&op); !ok {
		t.Fatal("no spend from a live slice")
	}
	clk.now = sent + 980*time.Millisecond // 1 s less 2 × 1% of it
	if _, _, ok := b.Spend(&op); ok {
		t.Fatal("spent at the slice's end, shortened by the clocks' rate allowance")
	}
	due := b.Due()
	want := counter.Op{Kind: counter.Return, Key: "k", Window: 60_000, Buckets: 10, N: 9, SliceID: 9}
	if len(due) != 1 || due[0].Op != want {
		t.Fatalf("due %+v; want one return of %+v", due, want)
	}
	lost := fmt.Errorf("%w: no answer", counter.ErrOutcomeUnknown)
	r := due[0]
	for i := 1; i < maxTries; i++ {
		b.Sent(r, lost)
		again := b.Due()
		if len(again) != 1 || again[0].Op != want {
			t.Fatalf("try %d: due %+v; want the return again", i+1, again)
		}
		r = again[0]
	}
	b.Sent(r, lost)
	if due := b.Due(); len(due) != 0 {
		t.Errorf("sent more than %d times: %+v", maxTries, due)
	}
	b.Sent(r, fmt.Errorf("%w: moved", counter.ErrNotOwner))
	if due := b.Due(); len(due) != 0 {
		t.Errorf("a return refused is sent again: %+v", due)
	}
	if s := b.Stats(); s.Lent != 1 || s.Spent != 1 || s.Expired != 1 {
		t.Errorf("stats %+v; want 1 lent, 1 spent, 1 expired", s)
	}
}

// Forwards of more counters than MaxTracked cost no more memory; bad configs are named.
func TestBounds(t *testing.T) {
	clk := &fakeClock{}
	b, err := New(Config{Now: clk.Now, HotAfter: 1, MaxTracked: 4, MaxSlices: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		op := allowOp(fmt.Sprint("k", i), 10)
		if ask := b.Ask(&op); ask > 0 {
			b.Got(&op, clk.now, counter.Result{Allowed: true, Lent: &counter.Lent{ID: uint64(i), N: 1, TTL: time.Second}})
		}
	}
	if len(b.cur) > 4 || b.Held() > 2 {
		t.Errorf("tracks %d counters and holds %d slices; want at most 4 and 2", len(b.cur), b.Held())
	}
	for _, c := range []struct {
		cfg  Config
		name string
	}{{Config{}, "Now"}, {Config{Now: clk.Now, HotAfter: -1}, "HotAfter"}, {Config{Now: clk.Now, Drift: 0.5}, "Drift"}} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%+v: got %v; want an error naming %s", c.cfg, err, c.name)
		}
	}
}

// An incr judged by a limit (ShouldRateLimit's) is spent from a slice like an allow; one
// without a limit, or any other op, never is.
func TestIncrsJudgedByALimitAreSliced(t *testing.T) {
	clk := &fakeClock{}
	b := newBorrower(t, clk, 1)
	incr := counter.Op{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 2, Limit: 100}
	if ask := b.Ask(&incr); ask == 0 {
		t.Fatal("no ask for a hot incr judged by a limit")
	}
	a := AskFor(&incr, 5)
	if a.Kind != counter.Borrow || a.N != 0 || a.Ask != 5 || a.Limit != 100 || a.Key != "k" {
		t.Fatalf("AskFor: %+v; want a Borrow of nothing asking 5 of limit 100", a)
	}
	b.Got(&a, clk.now, counter.Result{Allowed: true, Count: 30, Lent: &counter.Lent{ID: 1, N: 5, TTL: time.Second}})
	if res, _, ok := b.Spend(&incr); !ok || !res.Sliced || res.Count != 32 {
		t.Fatalf("spend of an incr of 2: %+v, %v; want sliced, count 32", res, ok)
	}
	for _, op := range []counter.Op{{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1},
		{Kind: counter.Count, Key: "k", Window: 60_000, Buckets: 10, Limit: 100}} {
		if _, _, ok := b.Spend(&op); ok || b.Ask(&op) != 0 {
			t.Errorf("%+v was spent from a slice or asked for", op)
		}
	}
}
