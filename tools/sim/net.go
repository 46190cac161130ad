package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/owner"
)

// network carries messages between nodes: each after a small random delay (so
// messages overtake each other), lost on a cut link or by a link's loss rate, now and
// then late by a spike, and, where the message may be (heartbeats, handoffs), now and
// then delivered twice.
type network struct {
	w     *world
	cut   map[[2]int]bool    // both ways
	loss  map[[2]int]float64 // one way: from, to
	spike float64            // chance a message is late by up to spikeMax
}

const spikeMax = 300 * time.Millisecond

func newNetwork(w *world) *network {
	return &network{w: w, cut: map[[2]int]bool{}, loss: map[[2]int]float64{}}
}

func pair(a, b *node) [2]int { return [2]int{min(a.idx, b.idx), max(a.idx, b.idx)} }

// linked reports whether a and b can exchange messages at all now.
func (nw *network) linked(a, b *node) bool { return !nw.cut[pair(a, b)] }

// delay is a message's way from a to b.
func (nw *network) delay() time.Duration {
	d := nw.w.jitter(500 * time.Microsecond)
	if nw.w.rng.Float64() < nw.spike {
		d += time.Duration(nw.w.rng.Int64N(int64(spikeMax)))
	}
	return d
}

// send delivers fn at to, unless the link is cut (now or when it would arrive) or loses
// it.
func (nw *network) send(from, to *node, fn func()) {
	if !nw.linked(from, to) || nw.w.rng.Float64() < nw.loss[[2]int{from.idx, to.idx}] {
		return
	}
	nw.w.sched.after(nw.delay(), to, func() {
		if nw.linked(from, to) {
			fn()
		}
	})
}

// rpcTimeout is how long a caller waits for an answer (rpc.Config.Timeout).
const rpcTimeout = time.Second

// call sends a request to the node named to and waits for its answer: serve runs there
// and hands its answer to respond; back gets it at the caller, or an error: unsent
// (counter.ErrNotSent: to is not running, or the caller has not heard from it for
// a lease, as rpc.Client.MarkDown does in a node), or with the outcome unknown after rpcTimeout.
// dup lets the request be delivered twice (a resend): serve must be idempotent.
func (nw *network) call(from *node, toName string, dup bool, serve func(respond func(any)), back func(any, error)) {
	w := nw.w
	to := w.byName(toName)
	answered := false
	finish := func(v any, err error) {
		if !answered {
			answered = true
			back(v, err)
		}
	}
	if to == nil || !to.up || nw.silent(from, to) {
		w.sched.after(w.jitter(100*time.Microsecond), from, func() {
			finish(nil, fmt.Errorf("%w: %s is not reachable", counter.ErrNotSent, toName))
		})
		return
	}
	inc := to.inc
	deliver := func() {
		if to.inc != inc {
			return // another run: the connection it came on is gone
		}
		serve(func(v any) { nw.send(to, from, func() { finish(v, nil) }) })
	}
	nw.send(from, to, deliver)
	if dup && w.rng.Float64() < 0.05 {
		nw.send(from, to, deliver)
	}
	w.sched.after(from.simDur(rpcTimeout), from, func() {
		finish(nil, errors.New("sim: no answer in time (outcome unknown)"))
	})
}

// silent reports whether from has not heard a heartbeat of to for a lease: it marks to
// down and sends it nothing but heartbeats (node.markSilentPeers).
func (nw *network) silent(from, to *node) bool {
	return from.silent(to.name, from.mono())
}

// peers is a node's owner.Peers: Handoffs as rpc calls.
type peers struct{ n *node }

func (p peers) Handoff(addr string, h *owner.Handoff, done func(error)) {
	w := p.n.w
	w.handoffs++
	w.net.call(p.n, addr, true, func(respond func(any)) {
		to := w.byName(addr)
		err := to.owner.Handoff(bg, h)
		if err == nil {
			w.noteHandoff(p.n, to, h)
		}
		respond(err)
	}, func(v any, err error) {
		if err == nil {
			err, _ = v.(error)
		}
		done(err)
	})
}
