package fallback

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// The Redis Doer and counter.Local answer the same batches the same way, invalid ops
// included.
func TestDoerMatchesLocal(t *testing.T) {
	_, st := startStore(t)
	s := seed(t)
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 3))
	now := int64(1_700_000_000_000)
	clock := func() int64 { return now }
	local := &counter.Local{Store: leaparray.NewStore(), Now: clock}
	remote := &Doer{Store: st, Now: clock}
	for round := range 50 {
		now += rng.Int64N(3000)
		ops := randomOps(rng, 1+rng.IntN(40))
		want := make([]counter.Result, len(ops))
		got := make([]counter.Result, len(ops))
		local.Do(bg, ops, want)
		remote.Do(bg, ops, got)
		for i := range ops {
			if !sameResult(got[i], want[i]) {
				t.Fatalf("round %d op %d %+v:\n got %+v\nwant %+v", round, i, ops[i], got[i], want[i])
			}
		}
	}
}

func randomOps(rng *rand.Rand, n int) []counter.Op {
	keys := []string{"a", "b", "{c}"}
	ops := make([]counter.Op, n)
	for i := range ops {
		ops[i] = counter.Op{
			Kind: counter.Kind(1 + rng.IntN(4)), Key: keys[rng.IntN(len(keys))],
			Window: 10_000, Buckets: 10, N: 1 + rng.Int64N(3), Limit: rng.Int64N(20),
		}
		switch rng.IntN(20) { // a few invalid ops
		case 0:
			ops[i].Key = ""
		case 1:
			ops[i].Buckets = 3
		case 2:
			ops[i].N = 0
		case 3:
			ops[i].Kind = 0
		}
	}
	return ops
}

// sameResult compares results; errors must wrap the same contract error.
func sameResult(a, b counter.Result) bool {
	if (a.Err == nil) != (b.Err == nil) {
		return false
	}
	if a.Err != nil {
		for _, e := range []error{counter.ErrEmptyKey, counter.ErrBadBuckets, counter.ErrBadN, counter.ErrUnknownOp} {
			if errors.Is(a.Err, e) != errors.Is(b.Err, e) {
				return false
			}
		}
		return true
	}
	return a == b
}
