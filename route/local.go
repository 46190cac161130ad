package route

import (
	"context"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// localCall is a batch of ops this node owns, handed to the local Decider: inner
// carries the caller's ops and results, and its Done (decidedLater, bound once) finishes
// the call when the local Decider decides later. Calls are reused (Router.calls), so
// the common path, decided at once, allocates nothing (BenchmarkDecideLocal).
type localCall struct {
	r     *Router
	ctx   context.Context
	rg    *ring.Ring
	outer *counter.Batch
	inner counter.Batch
}

func newLocalCall(r *Router) any {
	c := &localCall{r: r}
	c.inner.Done = c.decidedLater
	return c
}

// decideLocal hands b, whose ops this node owns, to the local Decider.
func (r *Router) decideLocal(ctx context.Context, rg *ring.Ring, b *counter.Batch) bool {
	c := r.calls.Get().(*localCall)
	c.ctx, c.rg, c.outer = ctx, rg, b
	c.inner.Ops, c.inner.Results = b.Ops, b.Results
	if !r.local.Decide(ctx, &c.inner) {
		return false // decidedLater finishes the call
	}
	return c.finish(false)
}

// decidedLater is the local Decider's Done.
func (c *localCall) decidedLater() { c.finish(true) }

// finish ends the call once the local Decider has decided (later: after Decide
// returned). Ops it answered certainly not decided (the ring moved them while they
// waited) are routed again, on a goroutine, since that waits for the ring; the fail
// policy answers the rest. It reports whether the call ended here, at once; a call
// that ends later gets Done.
func (c *localCall) finish(later bool) bool {
	r, ctx, rg, b := c.r, c.ctx, c.rg, c.outer
	c.ctx, c.rg, c.outer, c.inner.Ops, c.inner.Results = nil, nil, nil, nil, nil
	r.calls.Put(c)
	if idx := undecidedOps(b.Results); len(idx) > 0 {
		go r.retryThenDone(ctx, rg, b, idx)
		return false
	}
	r.failPolicy(b.Ops, b.Results) // also for what this node could not decide itself
	if later {
		b.Done()
	}
	return true
}

// retryThenDone routes the ops idx of b again (retry), applies the fail policy and
// ends the call.
func (r *Router) retryThenDone(ctx context.Context, rg *ring.Ring, b *counter.Batch, idx []int) {
	r.retry(ctx, rg, b.Ops, b.Results, idx)
	r.failPolicy(b.Ops, b.Results)
	b.Done()
}
