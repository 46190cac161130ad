package counter

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/leapcount/leapcount/leaparray"
)

// Local decides ops against a store in this process, with the given clock.
type Local struct {
	Store  *leaparray.Store
	Now    func() int64 // milliseconds since the Unix epoch
	Limits Limits
	Hot    Observer // hears every valid op's key (nil: none)
	Tally  *Tally   // counts allow decisions by result (nil: none)
}

// Tally counts the allow ops decided here, by result.
type Tally struct {
	allowed, denied atomic.Uint64
}

// Counts returns the allow ops decided so far: allowed, and denied.
func (t *Tally) Counts() (allowed, denied uint64) { return t.allowed.Load(), t.denied.Load() }

func (t *Tally) note(allowed bool) {
	if allowed {
		t.allowed.Add(1)
	} else {
		t.denied.Add(1)
	}
}

// Observer hears the key of each op decided, at the time it was (hotkeys.Sketch).
type Observer interface {
	Observe(key string, now int64)
}

// Decide decides b's ops against the store, always at once (see Decider).
func (l *Local) Decide(_ context.Context, b *Batch) bool {
	l.DecideNow(b.Ops, b.Results)
	return true
}

// DecideNow decides ops against the store, in order, and fills results. Invalid ops
// get their validation error and change nothing.
func (l *Local) DecideNow(ops []Op, results []Result) {
	now := l.Now()
	if len(ops) > 1 {
		for i := range ops {
			l.Store.Prefetch(ops[i].Key, leaparray.Spec{WindowMs: ops[i].Window, Buckets: ops[i].Buckets})
		}
	}
	for i := range ops {
		results[i] = l.do(&ops[i], now)
	}
}

func (l *Local) do(op *Op, now int64) Result {
	if err := l.Limits.Ready(op); err != nil {
		return Result{Err: err}
	}
	if l.Hot != nil && op.Kind != Borrow && op.Kind != Return { // (a node's ask or return, not a client's op)
		l.Hot.Observe(op.Key, now)
	}
	sp := leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
	var res Result
	var err error
	switch op.Kind {
	case Incr:
		res.Count, err = l.Store.TryIncr(op.Key, sp, op.N, now)
	case Count:
		res.Count = l.Store.Count(op.Key, sp, now)
	case Allow, Borrow:
		// (The slice a Borrow asks for is the owner's to lend: owner/slices.go.)
		var d leaparray.Decision
		d, err = l.Store.TryAllow(op.Key, sp, op.Limit, op.N, now)
		res = Result{Allowed: d.Allowed, Count: d.Count, Remaining: d.Remaining, RetryAfterMs: d.RetryAfterMs}
		if err == nil && l.Tally != nil && op.Kind == Allow { // (a Borrow is a node's ask)
			l.Tally.note(d.Allowed)
		}
	case Reset:
		res.Existed, err = l.Store.TryReset(op.Key, sp, now)
	case Return:
		// Only an owner that lent the slice takes it back (owner/slices.go); here it
		// changes nothing.
	default:
		return Result{Err: fmt.Errorf("%w: %v", ErrUnknownOp, op.Kind)}
	}
	if err != nil {
		return Result{Err: StoreError(err)}
	}
	return res
}

// StoreError words a bounded store's refusal (leaparray.ErrFull, ErrTooManyShapes)
// for clients, as ErrFull.
func StoreError(err error) error {
	if errors.Is(err, leaparray.ErrTooManyShapes) {
		return fmt.Errorf("%w: this node holds its most window shapes (--max-shapes); a shape is forgotten once none of its counters is in its window", ErrFull)
	}
	return fmt.Errorf("%w: this node holds its most counters (--max-counters), none idle; new ones are admitted as old ones leave their window", ErrFull)
}
