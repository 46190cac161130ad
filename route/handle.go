package route

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// HandleAsync decides a batch forwarded by a peer (rpc.AsyncHandler), from the rpc
// connection's reader, which must never wait: the ops this node owns are decided by
// Forwarded (the local Decider when unset), the others answered ErrNotOwner, never
// forwarded a second time; done is called once they are.
func (r *Router) HandleAsync(ctx context.Context, req *rpc.Request, results []counter.Result, done func()) {
	for i := range req.Ops {
		_ = r.limits.Ready(&req.Ops[i]) // where a forwarded op enters this node
	}
	rg := r.ring.Load()
	if rg == nil { // still joining: others already count this node in, it does not yet
		for i := range results {
			results[i] = counter.Result{Err: fmt.Errorf("%w: this node is still joining", counter.ErrNotOwner)}
		}
		done()
		return
	}
	if r.allLocal(rg, req.Ops) {
		counter.Start(ctx, r.owned(), &counter.Batch{Ops: req.Ops, Results: results, Done: done})
		return
	}
	r.handleMixed(ctx, rg, req, results, done)
}

// owned is the Decider of the forwarded ops this node owns.
func (r *Router) owned() counter.Decider {
	if r.Forwarded != nil {
		return r.Forwarded
	}
	return r.local
}

// handleMixed decides the forwarded ops of req this node owns, as HandleAsync, and
// answers the others ErrNotOwner (or unavailable, with no owner at all).
func (r *Router) handleMixed(ctx context.Context, rg *ring.Ring, req *rpc.Request, results []counter.Result, done func()) {
	var keep []counter.Op
	var idx []int
	for i := range req.Ops {
		if err := r.notHere(rg, req, i); err != nil {
			results[i] = counter.Result{Err: err}
			continue
		}
		keep, idx = append(keep, req.Ops[i]), append(idx, i)
	}
	if len(keep) == 0 {
		done()
		return
	}
	res := make([]counter.Result, len(keep))
	counter.Start(ctx, r.owned(), &counter.Batch{Ops: keep, Results: res, Done: func() {
		for k, i := range idx {
			results[i] = res[k]
		}
		done()
	}})
}

// notHere is why the forwarded op i of req is not decided here (nil when it is, or
// when it is invalid: the Decider answers that): it belongs to another member in this
// node's ring, or to nobody.
func (r *Router) notHere(rg *ring.Ring, req *rpc.Request, i int) error {
	op := &req.Ops[i]
	if !op.Checked() {
		return nil
	}
	addr, err := r.ownerAddr(rg, op)
	if err == nil && addr != "" {
		err = fmt.Errorf("%w: %q belongs to %s here (epoch %d; sender's %d)", counter.ErrNotOwner, op.Key, addr, rg.Epoch(), req.Epoch)
	}
	return err
}

// Handle is HandleAsync for a caller that waits (rpc.Handler).
func (r *Router) Handle(ctx context.Context, req *rpc.Request, results []counter.Result) {
	ch := make(chan struct{})
	r.HandleAsync(ctx, req, results, func() { close(ch) })
	<-ch
}
