package counter

import (
	"context"
	"sync"
)

// A Decider decides operations on counters. Every layer of a node's op path is one (the
// cluster router, route.Router; the partition owner, owner.Owner; the in-memory store's
// Local), each handing a batch to the next, and every front end holds the first.
//
// Decide is the one way in, for callers that may wait and for an event loop that must
// not alike: it never waits itself. Ops it can decide at once (the common case: this
// node owns them and holds them in memory) are decided before it returns; the others
// (forwarded to another node, loaded from Redis, waiting for a lease) are decided
// later, and Done says when.
type Decider interface {
	// Decide decides b.Ops into b.Results (len(b.Results) == len(b.Ops)). An op that
	// could not be decided gets Err set; ops on the same counter are decided in slice
	// order; an invalid op is answered through Err, never a panic.
	//
	// When every op was decided before it returns, Decide reports true and never calls
	// b.Done. Otherwise it reports false and calls b.Done once, from any goroutine,
	// possibly before it returns; until then b, its ops and its results are the
	// Decider's. ctx's deadline bounds the ops; its cancellation after Decide returns
	// may not be watched.
	Decide(ctx context.Context, b *Batch) bool
}

// Batch is one call's ops, the results they fill, and what to call once they are
// decided later than Decide's return (see Decider).
type Batch struct {
	Ops     []Op
	Results []Result
	Done    func()
}

// Do decides ops with d and waits until they are: for callers that may wait (an HTTP
// handler, a test).
func Do(ctx context.Context, d Decider, ops []Op, results []Result) {
	w := waiters.Get().(*waiter)
	w.b.Ops, w.b.Results = ops, results
	if !d.Decide(ctx, &w.b) {
		<-w.decided
	}
	w.b.Ops, w.b.Results = nil, nil
	waiters.Put(w)
}

// waiter is Do's batch and what it waits on, reused (waiters): a call decided at once
// allocates nothing (BenchmarkDo).
type waiter struct {
	b       Batch
	decided chan struct{} // one slot: Done never waits for Do to receive
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{decided: make(chan struct{}, 1)}
	w.b.Done = func() { w.decided <- struct{}{} }
	return w
}}

// Start decides b with d and calls b.Done once the ops are decided, at once or later:
// for callers that go on the same way either way (an rpc connection's reader).
func Start(ctx context.Context, d Decider, b *Batch) {
	if d.Decide(ctx, b) {
		b.Done()
	}
}

// Waiting adapts a function that decides ops and may wait for it to a Decider, which
// runs it on a goroutine of its own: for deciders written as plain code (test doubles,
// tools), never on the op path.
type Waiting func(ctx context.Context, ops []Op, results []Result)

// Decide runs w on a goroutine and then calls b.Done.
func (w Waiting) Decide(ctx context.Context, b *Batch) bool {
	go func() {
		w(ctx, b.Ops, b.Results)
		b.Done()
	}()
	return false
}
