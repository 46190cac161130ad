package respapi

import (
	"context"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/route"
)

// fullOwner is an owner whose table is full: it refuses every op at once, so a router
// over it answers allows by its fail policy on the event loop.
type fullOwner struct{}

func (fullOwner) Decide(_ context.Context, b *counter.Batch) bool {
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: counter.ErrFull}
	}
	return true
}

// undecidingRouters are routers that decide no allow, each reached another way: at
// once (their owner is full, or they have not joined yet), or later, on a goroutine.
var undecidingRouters = []struct {
	name    string
	decider func(open bool) counter.Decider
}{
	{"owner-full", func(open bool) counter.Decider {
		r := route.New("n0", fullOwner{}, nil, counter.Limits{})
		r.SetRing(ring.New([]ring.Member{{Name: "n0", RPCAddr: "127.0.0.1:1"}}, ring.Config{}))
		r.FailOpen = open
		return r
	}},
	{"not-joined", func(open bool) counter.Decider {
		r := route.New("n0", nil, nil, counter.Limits{})
		r.FailOpen = open
		return r
	}},
	{"later", func(open bool) counter.Decider {
		r := route.New("n0", nil, nil, counter.Limits{})
		r.FailOpen = open
		return counter.Waiting(func(ctx context.Context, ops []counter.Op, res []counter.Result) { counter.Do(ctx, r, ops, res) })
	}},
}

// SW.ALLOW answered by the fail policy keeps its form, 4 integers, with count and
// remaining -1 (a decision never has them below 0): alone, pipelined, and in a
// transaction.
func TestFailPolicyAnswerHasNegativeCount(t *testing.T) {
	for _, way := range undecidingRouters {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail-open=%v", way.name, open), func(t *testing.T) {
				c := startServer(t, func(cfg *Config) { cfg.Decider = way.decider(open) }).dial(t)
				want := "*[:0 :-1 :-1 :1000]" // denied: ask again after a bucket
				if open {
					want = "*[:1 :-1 :-1 :0]"
				}
				allow := encode("SW.ALLOW", "k", "10s", "5")
				wantReply(t, c.do("SW.ALLOW", "k", "10s", "5"), want)

				c.write(allow + encode("PING") + allow)
				for _, w := range []string{want, "+PONG", want} {
					wantReply(t, c.reply(), w)
				}

				c.write(encode("MULTI") + allow + allow + encode("EXEC"))
				for _, w := range []string{"+OK", "+QUEUED", "+QUEUED", "*[" + want + " " + want + "]"} {
					wantReply(t, c.reply(), w)
				}
			})
		}
	}
}
