package route

import (
	"context"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// answering is a Forwarder that answers every op at once, in this process: what a
// router costs around its forwarder, without the network.
type answering struct{}

func (a answering) Go(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result, done func(error)) {
	done(a.Do(ctx, addr, epoch, ops, results))
}

func (answering) Do(_ context.Context, _ string, _ uint64, ops []counter.Op, results []counter.Result) error {
	for i := range ops {
		results[i] = counter.Result{Count: 1}
	}
	return nil
}

// BenchmarkDoForwarded routes one op, or a batch of 16 spread over three nodes, through
// a router that owns none or a third of them: the router's own CPU and allocations per
// call, the forwarder answering at once.
func BenchmarkDoForwarded(b *testing.B) {
	members := []ring.Member{{Name: "n0", RPCAddr: "a0"}, {Name: "n1", RPCAddr: "a1"}, {Name: "n2", RPCAddr: "a2"}}
	rg := ring.New(members, ring.Config{})
	r := New("n0", &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}, answering{}, counter.Limits{})
	r.SetRing(rg)
	op := func(key string) counter.Op {
		return counter.Op{Kind: counter.Incr, Key: key, Window: 60_000, Buckets: 10, N: 1}
	}
	var spread []counter.Op
	for i := 0; len(spread) < 16; i++ {
		spread = append(spread, op(fmt.Sprint("k", i)))
	}
	for _, c := range []struct {
		name string
		ops  []counter.Op
	}{
		{"one-op-elsewhere", []counter.Op{op(keyOwnedBy(rg, "n1"))}},
		{"16-ops-spread", spread},
	} {
		b.Run(c.name, func(b *testing.B) {
			res := make([]counter.Result, len(c.ops))
			b.ReportAllocs()
			for b.Loop() {
				counter.Do(context.Background(), r, c.ops, res)
			}
			if res[0].Err != nil {
				b.Fatal(res[0].Err)
			}
		})
	}
}
