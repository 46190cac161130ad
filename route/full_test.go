package route

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/leaparray"
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
			r := New("n0", failingDoer{cause}, peerrpc.Forwarder{C: peerrpc.NewClient(rpc.Config{})}, counter.Limits{})
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

// A router refuses client ops while its node joins (unavailable, not the fail policy's
// answer: the node decides nothing yet) and once it stops (for good), and takes them
// in between; forwarded ops are not client ops, and are taken throughout.
func TestAdmission(t *testing.T) {
	local := &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}
	r := New("n0", local, peerrpc.Forwarder{C: peerrpc.NewClient(rpc.Config{})}, counter.Limits{})
	r.SetRing(ring.New([]ring.Member{{Name: "n0", RPCAddr: "127.0.0.1:1"}}, ring.Config{}))
	r.FailOpen = true
	allow := func() counter.Result {
		res := make([]counter.Result, 1)
		counter.Do(context.Background(), r, []counter.Op{{Kind: counter.Allow, Key: "k", Window: 1000, Buckets: 10, N: 1, Limit: 5}}, res)
		return res[0]
	}
	forwarded := func() counter.Result {
		res := make([]counter.Result, 1)
		r.Handle(context.Background(), 0, []counter.Op{{Kind: counter.Incr, Key: "f", Window: 1000, Buckets: 10, N: 1}}, res)
		return res[0]
	}
	steps := []struct {
		set  Admission
		want error // nil: decided
	}{{Joining, counter.ErrUnavailable}, {Admitting, nil}, {Stopping, counter.ErrShuttingDown}, {Admitting, counter.ErrShuttingDown}}
	for i, s := range steps {
		r.SetAdmission(s.set)
		got := allow()
		if s.want == nil && (got.Err != nil || got.Undecided != nil || !got.Allowed) || s.want != nil && !errors.Is(got.Err, s.want) {
			t.Fatalf("step %d (set %d): allow got %+v; want err %v", i, s.set, got, s.want)
		}
		if f := forwarded(); f.Err != nil {
			t.Fatalf("step %d: a forwarded op got %v; want decided", i, f.Err)
		}
	}
}
