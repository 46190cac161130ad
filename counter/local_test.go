package counter

import (
	"errors"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/leaparray"
)

// TestLocalOnAFullStore checks what each op answers when its node's store is full: ops
// that would create a counter fail with ErrFull (a failure of the service, not bad
// input) and change nothing; the others, and every op on a counter held, work.
func TestLocalOnAFullStore(t *testing.T) {
	const now = 1_700_000_000_000
	st := leaparray.NewStore(leaparray.WithBounds(leaparray.Bounds{MaxUnits: 1, MaxShapes: 1}))
	l := &Local{Store: st, Now: func() int64 { return now }}
	op := func(kind Kind, key string, window int64) Result {
		res := make([]Result, 1)
		l.DecideNow([]Op{{Kind: kind, Key: key, Window: window, Buckets: 10, N: 1, Limit: 5}}, res)
		return res[0]
	}
	if r := op(Incr, "held", 1000); r.Err != nil || r.Count != 1 {
		t.Fatalf("first counter: got %+v; want count 1", r)
	}
	for _, kind := range []Kind{Incr, Allow} {
		r := op(kind, "new", 1000)
		if !errors.Is(r.Err, ErrFull) || IsBadInput(r.Err) || !strings.Contains(r.Err.Error(), "--max-counters") {
			t.Errorf("%v of a new counter: got %v; want ErrFull naming --max-counters, not bad input", kind, r.Err)
		}
	}
	if r := op(Incr, "held", 2000); !errors.Is(r.Err, ErrFull) || !strings.Contains(r.Err.Error(), "--max-shapes") {
		t.Errorf("incr of a new shape: got %v; want ErrFull naming --max-shapes", r.Err)
	}
	if r := op(Count, "new", 1000); r.Err != nil || r.Count != 0 {
		t.Errorf("count of a counter not held: got %+v; want 0", r)
	}
	if r := op(Allow, "held", 1000); r.Err != nil || !r.Allowed || r.Count != 2 {
		t.Errorf("allow of the held counter: got %+v; want allowed, count 2", r)
	}
	if r := op(Reset, "held", 1000); r.Err != nil || !r.Existed {
		t.Errorf("reset of the held counter: got %+v; want existed", r)
	}
	if r := op(Incr, "new", 1000); r.Err != nil || r.Count != 1 {
		t.Errorf("incr of a new counter once the reset made room: got %+v; want count 1", r)
	}
}

type keysHeard []string

func (k *keysHeard) Observe(key string, _ int64) { *k = append(*k, key) }

// The hot-key sketch hears the ops clients sent, not the asks for slices and their
// returns that nodes send each other beside them.
func TestLocalTellsTheSketchOnlyClientsOps(t *testing.T) {
	var heard keysHeard
	l := &Local{Store: leaparray.NewStore(), Now: func() int64 { return 1_700_000_000_000 }, Hot: &heard}
	ops := []Op{
		{Kind: Allow, Key: "client", Window: 1000, Buckets: 10, N: 1, Limit: 5},
		{Kind: Borrow, Key: "ask", Window: 1000, Buckets: 10, Limit: 5, Ask: 2},
		{Kind: Return, Key: "return", Window: 1000, Buckets: 10, N: 1, Limit: 5},
		{Kind: Incr, Key: "incr", Window: 1000, Buckets: 10, N: 1},
	}
	res := make([]Result, len(ops))
	l.DecideNow(ops, res)
	for i := range res {
		if res[i].Err != nil {
			t.Fatalf("%v: %v", ops[i].Kind, res[i].Err)
		}
	}
	if len(heard) != 2 || heard[0] != "client" || heard[1] != "incr" {
		t.Fatalf("the sketch heard %q; want [client incr]", heard)
	}
}
