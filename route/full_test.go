package route

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// failingDoer is an owner that cannot decide anything: it answers every op with err.
type failingDoer struct{ err error }

func (d failingDoer) Decide(_ context.Context, b *counter.Batch) bool {
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: fmt.Errorf("%w: test", d.err)}
	}
	return true
}

// An allow that this node, its own owner, cannot decide (it is full, or unavailable) is
// answered by the fail policy, as one its peer cannot decide is; an incr gets the error.
func TestLocalOwnerAllowGetsFailPolicy(t *testing.T) {
	for _, cause := range []error{counter.ErrFull, counter.ErrUnavailable} {
		for _, open := range []bool{false, true} {
			r := New("n0", failingDoer{cause}, rpc.NewClient(rpc.Config{}), counter.Limits{})
			r.SetRing(ring.New([]ring.Member{{Name: "n0", RPCAddr: "127.0.0.1:1"}}, ring.Config{}))
			r.FailOpen = open
			ops := []counter.Op{
				{Kind: counter.Allow, Key: "k", Window: 10_000, Buckets: 10, N: 1, Limit: 5},
				{Kind: counter.Incr, Key: "k", Window: 10_000, Buckets: 10, N: 1},
			}
			res := make([]counter.Result, 2)
			counter.Do(context.Background(), r, ops, res)
			wantPolicyAnswer(t, r, res[0], open, cause)
			if !errors.Is(res[1].Err, cause) {
				t.Errorf("%v, fail-open %v: incr got %+v; want that error", cause, open, res[1])
			}
		}
	}
}
