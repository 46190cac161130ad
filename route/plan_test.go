package route

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// recording is a Forwarder that answers each op with a count naming where it was sent:
// the index of its address among addrs, times 1000, plus the op's N.
type recording struct {
	mu    sync.Mutex
	addrs map[string]int
	calls int
}

func (f *recording) Go(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result, done func(error)) {
	done(f.Do(ctx, addr, epoch, ops, results))
}

func (f *recording) Do(_ context.Context, addr string, _ uint64, ops []counter.Op, results []counter.Result) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	for i := range ops {
		results[i] = counter.Result{Count: int64(f.addrs[addr])*1000 + ops[i].N}
	}
	return nil
}

// A batch spread over many owners (past the few a plan looks up in a list) reaches
// each op's owner, once per owner, and every answer lands in its op's place; invalid
// ops are answered here.
func TestPlanManyOwners(t *testing.T) {
	for _, members := range []int{3, 8, 9, 40} {
		t.Run(fmt.Sprint(members, " members"), func(t *testing.T) {
			var ms []ring.Member
			f := &recording{addrs: map[string]int{}}
			for i := 0; i < members; i++ {
				ms = append(ms, ring.Member{Name: fmt.Sprint("n", i), RPCAddr: fmt.Sprint("a", i)})
				f.addrs[fmt.Sprint("a", i)] = i
			}
			rg := ring.New(ms, ring.Config{})
			r := New("n0", &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}, f, counter.Limits{})
			r.SetRing(rg)
			ops := make([]counter.Op, 500)
			for i := range ops {
				ops[i] = counter.Op{Kind: counter.Incr, Key: fmt.Sprint("key-", i), Window: 60_000, Buckets: 10, N: int64(1 + i%7)}
				if i%50 == 0 {
					ops[i].Key = "" // invalid
				}
			}
			res := make([]counter.Result, len(ops))
			counter.Do(context.Background(), r, ops, res)
			checkAnswers(t, rg, f.addrs, ops, res)
			owners := map[string]bool{}
			for _, op := range ops {
				if m, ok := rg.Owner(op.Key); ok && op.Key != "" && m.Name != "n0" {
					owners[m.Name] = true
				}
			}
			if f.calls != len(owners) {
				t.Fatalf("forwarded calls: got %d; want %d (one per other owner)", f.calls, len(owners))
			}
		})
	}
}
