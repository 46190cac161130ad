package route

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// HandleAsync decides ops a peer forwarded under its ring epoch (node serves them
// from the rpc connection's reader, which must never wait): the ops this node owns are
// decided by Forwarded (the local Decider when unset), the others answered
// ErrNotOwner, never forwarded a second time; done is called once they are.
func (r *Router) HandleAsync(ctx context.Context, epoch uint64, ops []counter.Op, results []counter.Result, done func()) {
	for i := range ops {
		_ = r.limits.Ready(&ops[i]) // where a forwarded op enters this node
	}
	rg := r.ring.Load()
	if rg == nil { // still joining: others already count this node in, it does not yet
		for i := range results {
			results[i] = counter.Result{Err: fmt.Errorf("%w: this node is still joining", counter.ErrNotOwner)}
		}
		done()
		return
	}
	if r.allLocal(rg, ops) {
		counter.Start(ctx, r.owned(), &counter.Batch{Ops: ops, Results: results, Done: done})
		return
	}
	r.handleMixed(ctx, rg, epoch, ops, results, done)
}

// owned is the Decider of the forwarded ops this node owns.
func (r *Router) owned() counter.Decider {
	if r.Forwarded != nil {
		return r.Forwarded
	}
	return r.local
}

// handleMixed decides the forwarded ops this node owns, as HandleAsync, and answers
// the others ErrNotOwner (or unavailable, with no owner at all).
func (r *Router) handleMixed(ctx context.Context, rg *ring.Ring, epoch uint64, ops []counter.Op, results []counter.Result, done func()) {
	var keep []counter.Op
	var idx []int
	for i := range ops {
		if err := r.notHere(rg, epoch, &ops[i]); err != nil {
			results[i] = counter.Result{Err: err}
			continue
		}
		keep, idx = append(keep, ops[i]), append(idx, i)
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

// notHere is why the forwarded op, sent under the sender's ring epoch, is not decided
// here (nil when it is, or when it is invalid: the Decider answers that): it belongs to
// another member in this node's ring, or to nobody.
func (r *Router) notHere(rg *ring.Ring, epoch uint64, op *counter.Op) error {
	if !op.Checked() {
		return nil
	}
	addr, err := r.ownerAddr(rg, op)
	if err == nil && addr != "" {
		err = fmt.Errorf("%w: %q belongs to %s here (epoch %d; sender's %d)", counter.ErrNotOwner, op.Key, addr, rg.Epoch(), epoch)
	}
	return err
}

// Handle is HandleAsync for a caller that waits.
func (r *Router) Handle(ctx context.Context, epoch uint64, ops []counter.Op, results []counter.Result) {
	ch := make(chan struct{})
	r.HandleAsync(ctx, epoch, ops, results, func() { close(ch) })
	<-ch
}
