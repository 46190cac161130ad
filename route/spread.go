package route

import (
	"context"
	"sync/atomic"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// spreadCall is a batch whose ops have several owners (or invalid ops among them),
// decided without a goroutine of its own: every owner's group is sent, or decided
// here, at once, and the last group answered ends the call, on whichever goroutine
// answered it (an rpc connection's reader, which must never wait). Only ops to route
// again go to a goroutine: retry waits for the ring. A goroutine per call and one per
// remote group, each woken and each growing its stack, cost more than the call's own
// work (BenchmarkDoForwarded/16-ops-spread).
type spreadCall struct {
	r    *Router
	ctx  context.Context
	rg   *ring.Ring
	b    *counter.Batch
	p    *plan
	left atomic.Int32 // groups not answered yet, plus one that startSpread holds
}

// startSpread decides b's ops, of several owners, split by owner (plan); it reports
// true when every group was decided before it returned (b.Done is then not called).
func (r *Router) startSpread(ctx context.Context, rg *ring.Ring, b *counter.Batch) bool {
	s := &spreadCall{r: r, ctx: ctx, rg: rg, b: b, p: r.plan(rg, b.Ops, b.Results)}
	s.left.Store(int32(len(s.p.groups)) + 1)
	for _, g := range s.p.groups {
		if g.addr == "" {
			s.decideHere(g)
		} else {
			s.send(g)
		}
	}
	if s.left.Add(-1) != 0 {
		return false // the last group's answer ends it
	}
	if len(s.p.retry) > 0 {
		go s.finish()
		return false
	}
	r.failPolicy(b.Ops, b.Results)
	return true
}

// decideHere decides a group this node owns.
func (s *spreadCall) decideHere(g *group) {
	lb := &counter.Batch{Ops: g.ops, Results: g.results, Done: func() { s.answered(g) }}
	if s.r.local.Decide(s.ctx, lb) {
		s.answered(g)
	}
}

// send forwards a group to its owner (see plan.remote for what an error for the whole
// call means).
func (s *spreadCall) send(g *group) {
	m := ring.Member{Name: g.owner, RPCAddr: g.addr}
	s.r.forward.Go(s.ctx, g.addr, s.rg.Epoch(), g.ops, g.results, func(err error) {
		failForward(m, err, g.results)
		s.r.noteNotOwner(g.owner, g.results)
		s.answered(g)
	})
}

// answered takes a group's results; the last one after startSpread returned ends the
// call.
func (s *spreadCall) answered(g *group) {
	s.p.scatter(g)
	if s.left.Add(-1) != 0 {
		return
	}
	if len(s.p.retry) > 0 {
		go s.finish()
		return
	}
	s.r.failPolicy(s.b.Ops, s.b.Results)
	s.b.Done()
}

// finish routes again the ops certainly not decided, applies the fail policy and ends
// the call.
func (s *spreadCall) finish() {
	s.r.retry(s.ctx, s.rg, s.b.Ops, s.b.Results, s.p.retry)
	s.r.failPolicy(s.b.Ops, s.b.Results)
	s.b.Done()
}
