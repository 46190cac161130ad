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
// over it answers allows by its fail policy on the event loop (TryDo).
type fullOwner struct{}

func (fullOwner) Do(_ context.Context, _ []counter.Op, results []counter.Result) {
	for i := range results {
		results[i] = counter.Result{Err: counter.ErrFull}
	}
}

func (o fullOwner) TryDo(ops []counter.Op, results []counter.Result) bool {
	o.Do(context.Background(), ops, results)
	return true
}

// undecidingRouters are routers that decide no allow, each reached another way: on the
// loop (their owner is full), or off it (not joined yet) through Start or through Do on
// a goroutine.
var undecidingRouters = []struct {
	name string
	doer func(open bool) counter.Doer
}{
	{"loop", func(open bool) counter.Doer {
		r := route.New("n0", fullOwner{}, nil, counter.Limits{})
		r.SetRing(ring.New([]ring.Member{{Name: "n0", RPCAddr: "127.0.0.1:1"}}, ring.Config{}))
		r.FailOpen = open
		return r
	}},
	{"Start", func(open bool) counter.Doer {
		r := route.New("n0", nil, nil, counter.Limits{})
		r.FailOpen = open
		return r
	}},
	{"Do", func(open bool) counter.Doer {
		r := route.New("n0", nil, nil, counter.Limits{})
		r.FailOpen = open
		return struct{ counter.QuickDoer }{r} // not a Starter: the loop hands the ops to a goroutine
	}},
}

// SW.ALLOW answered by the fail policy keeps its form, 4 integers, with count and
// remaining -1 (a decision never has them below 0): alone, pipelined, and in a
// transaction.
func TestFailPolicyAnswerHasNegativeCount(t *testing.T) {
	for _, way := range undecidingRouters {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail-open=%v", way.name, open), func(t *testing.T) {
				c := startServer(t, func(cfg *Config) { cfg.Doer = way.doer(open) }).dial(t)
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
