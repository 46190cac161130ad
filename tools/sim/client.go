package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/route"
)

// client sends one op at a time to a random running node, as an application would, and
// records what it was told.
type client struct {
	w     *world
	id    int
	busy  bool
	sent  int
	fresh bool // it sends ops on fresh keys (fresh.go)
}

// clientGiveUp is how long a client waits for an answer before it counts the op's
// outcome unknown (its entry node crashed with it, say).
const clientGiveUp = 10 * time.Second

// next sends the client's next op, after a short think, while the load runs.
func (c *client) next() {
	w := c.w
	w.sched.after(time.Duration(2+w.rng.IntN(40))*time.Millisecond, nil, func() {
		if w.sched.now >= w.loadEnd {
			return
		}
		entry := w.entryNode()
		if entry == nil {
			c.next()
			return
		}
		c.sent++
		var o counter.Op
		if c.fresh {
			o = w.pickFresh()
		} else {
			o = w.keys.pick(w.rng)
		}
		c.send(o, entry, func() { c.next() })
	})
}

// send routes o through entry to its owner, as route.Router does: ops certainly not
// decided there (not owner, unsent, expired) are routed again as entry's ring changes,
// for up to retryWait; an allow nobody could decide gets the fail policy's answer.
// then runs once the client knows the outcome.
func (c *client) send(o counter.Op, entry *node, then func()) {
	w := c.w
	start := w.sched.now
	done := false
	w.inflight++
	finish := func(res counter.Result, d decided) {
		if done {
			return
		}
		done = true
		w.inflight--
		if res.Err != nil && route.Retryable(&o, res.Err) && !errors.Is(res.Err, counter.ErrOutcomeUnknown) {
			res.Err = fmt.Errorf("%w: ownership of %q is moving (%v)", counter.ErrUnavailable, o.Key, res.Err)
		}
		if pol, ok := route.PolicyAnswer(&o, res.Err, false); ok {
			res = pol
		}
		w.keys.record(o, res, d, start)
		w.ops.add(o, res)
		then()
	}
	w.sched.after(clientGiveUp, nil, func() {
		finish(counter.Result{Err: fmt.Errorf("%w: the client gave up", counter.ErrOutcomeUnknown)}, decided{})
	})
	wait := 5 * time.Millisecond
	var try func()
	try = func() {
		c.route(o, entry, func(res counter.Result, d decided) {
			if res.Err == nil || !route.Retryable(&o, res.Err) || w.sched.now-start >= retryWait {
				finish(res, d)
				return
			}
			w.sched.after(wait, entry, try)
			wait = min(2*wait, 200*time.Millisecond)
		})
	}
	w.sched.after(0, entry, try)
}

// route sends o from entry to its owner in entry's ring and hands back the result: the
// owner's, or rpc's error for the whole call (unsent, or with the outcome unknown), and
// for an op on a fresh key (fresh.go) decided without an error, where it was placed.
func (c *client) route(o counter.Op, entry *node, back func(counter.Result, decided)) {
	owner, ok := entry.ownerOf(o.Key)
	if !ok {
		back(counter.Result{Err: fmt.Errorf("%w: %s has not joined a cluster yet", counter.ErrUnavailable, entry.name)}, decided{})
		return
	}
	if owner == entry.name {
		entry.decide([]counter.Op{o}, func(res []counter.Result) { back(res[0], entry.placed(&o, res[0])) })
		return
	}
	if borrow.Sliceable(&o) {
		if res, from, ok := entry.borrower.Spend(&o); ok {
			c.w.slices.Spent++
			c.w.checkSpend(from)
			back(res, decided{})
			return
		}
		if ask := entry.borrower.Ask(&o); ask > 0 {
			c.borrow(o, ask, entry, owner, back)
			return
		}
	}
	c.forward(o, entry, owner, false, nil, func(res, _ counter.Result, d decided) { back(res, d) })
}

// forward sends o from entry to owner (sent twice now and then when dup), with ask after
// it in the same call when set, and hands back the owner's results, or rpc's error for
// the whole call as both.
func (c *client) forward(o counter.Op, entry *node, owner string, dup bool, ask *counter.Op, back func(res, asked counter.Result, d decided)) {
	w := c.w
	w.net.call(entry, owner, dup, func(respond func(any)) {
		to := w.byName(owner)
		if name, ok := to.ownerOf(o.Key); !ok || name != to.name {
			respond(counter.Result{Err: fmt.Errorf("%w: %q is not %s's here", counter.ErrNotOwner, o.Key, to.name)})
			return
		}
		ops := []counter.Op{o}
		if ask != nil {
			ops = append(ops, *ask)
		}
		to.decide(ops, func(res []counter.Result) {
			p := placedResult{res: res[0], d: to.placed(&o, res[0])}
			if ask != nil {
				p.asked = res[1]
			}
			respond(p)
		})
	}, func(v any, err error) {
		var res counter.Result
		switch {
		case err == nil:
			if p, ok := v.(placedResult); ok {
				back(p.res, p.asked, p.d)
				return
			}
			res = v.(counter.Result)
		case errors.Is(err, counter.ErrNotSent):
			res = counter.Result{Err: err}
		default:
			res = counter.Result{Err: fmt.Errorf("%w: owner %s did not answer: %v", counter.ErrOutcomeUnknown, owner, err)}
		}
		back(res, res, decided{})
	})
}

// placedResult is an owner's answer with where it placed the op, and its answer to
// the ask that came with it.
type placedResult struct {
	res   counter.Result
	d     decided
	asked counter.Result
}

// placed records where n placed o, decided with res, when o is on a fresh key and was
// decided without an error.
func (n *node) placed(o *counter.Op, res counter.Result) decided {
	if !isFresh(o.Key) || res.Err != nil {
		return decided{}
	}
	return n.w.fresh.place(n, o)
}

// entryNode picks a running node that takes clients (not leaving).
func (w *world) entryNode() *node {
	var ok []*node
	for _, n := range w.nodes {
		if n.up && !n.leaving {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[w.rng.IntN(len(ok))]
}

// opStats counts the ops clients sent, by outcome.
type opStats struct {
	ops, ok, failed, unknown, policy int
	errs                             map[string]int
}

func (s *opStats) add(o counter.Op, res counter.Result) {
	s.ops++
	switch {
	case res.Undecided != nil:
		s.policy++
	case res.Err == nil:
		s.ok++
	case errors.Is(res.Err, counter.ErrOutcomeUnknown):
		s.unknown++
	default:
		s.failed++
		if s.errs == nil {
			s.errs = map[string]int{}
		}
		if len(s.errs) < 10 {
			s.errs[res.Err.Error()]++
		}
	}
}
