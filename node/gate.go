package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// gate passes client operations on to the next Doer while the node is ready. Before
// that (still joining: its ring may not yet know the other owners) it answers
// ErrUnavailable, and once closed ErrShuttingDown, so that a stopping node decides
// nothing new.
type gate struct {
	next   counter.Doer
	ready  func() bool
	closed atomic.Bool
	log    *slog.Logger
}

// slowRequest is how long a client request may take before it is logged.
const slowRequest = time.Second

func (g *gate) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	if g.refused(results) {
		return
	}
	start := time.Now()
	g.next.Do(ctx, ops, results)
	g.took(start, ops, results)
}

// Start is the next Doer's Start while the node is ready (Do's on a goroutine when it
// has none); otherwise it answers why not at once.
func (g *gate) Start(ctx context.Context, ops []counter.Op, results []counter.Result, done func()) {
	if g.refused(results) {
		done()
		return
	}
	start := time.Now()
	then := func() {
		g.took(start, ops, results)
		done()
	}
	if s, ok := g.next.(counter.Starter); ok {
		s.Start(ctx, ops, results, then)
		return
	}
	go func() {
		g.next.Do(ctx, ops, results)
		then()
	}()
}

// refused answers every op when the node takes none now (closed, or not ready yet),
// and reports whether it did.
func (g *gate) refused(results []counter.Result) bool {
	var err error
	switch {
	case g.closed.Load():
		err = counter.ErrShuttingDown
	case !g.ready():
		err = fmt.Errorf("%w: node is joining the cluster", counter.ErrUnavailable)
	default:
		return false
	}
	for i := range results {
		results[i] = counter.Result{Err: err}
	}
	return true
}

// took logs a request that took longer than slowRequest.
func (g *gate) took(start time.Time, ops []counter.Op, results []counter.Result) {
	if d := time.Since(start); d > slowRequest && g.log != nil {
		g.log.Warn("slow request", "took", d, "ops", len(ops), "first_key", ops[0].Key, "first_err", results[0].Err)
	}
}

// TryDo is the next Doer's TryDo while the node is ready; otherwise false, so that Do
// answers why not.
func (g *gate) TryDo(ops []counter.Op, results []counter.Result) bool {
	q, ok := g.next.(counter.QuickDoer)
	return ok && !g.closed.Load() && g.ready() && q.TryDo(ops, results)
}

func (g *gate) close() { g.closed.Store(true) }
