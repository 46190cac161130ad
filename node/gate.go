package node

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/leapcount/leapcount/counter"
)

// gate passes client operations on to the next Decider (the router) while the node is
// ready. Before that (still joining: its ring may not yet know the other owners) it
// answers ErrUnavailable, and once closed ErrShuttingDown, so that a stopping node
// decides nothing new. It is the first Decider every front end holds.
type gate struct {
	next   counter.Decider
	ready  func() bool
	closed atomic.Bool
}

// Decide is the next Decider's while the node is ready; otherwise it answers why not,
// at once.
func (g *gate) Decide(ctx context.Context, b *counter.Batch) bool {
	var err error
	switch {
	case g.closed.Load():
		err = counter.ErrShuttingDown
	case !g.ready():
		err = fmt.Errorf("%w: node is joining the cluster", counter.ErrUnavailable)
	default:
		return g.next.Decide(ctx, b)
	}
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: err}
	}
	return true
}

func (g *gate) close() { g.closed.Store(true) }
