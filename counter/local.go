package counter

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
)

// Local decides ops against a store in this process, with the given clock.
type Local struct {
	Store  *leaparray.Store
	Now    func() int64 // milliseconds since the Unix epoch
	Limits Limits
}

// Do decides each op in order. Invalid ops get their validation error and change nothing.
func (l *Local) Do(_ context.Context, ops []Op, results []Result) {
	now := l.Now()
	for i := range ops {
		results[i] = l.do(&ops[i], now)
	}
}

func (l *Local) do(op *Op, now int64) Result {
	if err := l.Limits.Validate(op); err != nil {
		return Result{Err: err}
	}
	sp := leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
	switch op.Kind {
	case Incr:
		return Result{Count: l.Store.Incr(op.Key, sp, op.N, now)}
	case Count:
		return Result{Count: l.Store.Count(op.Key, sp, now)}
	case Allow:
		d := l.Store.Allow(op.Key, sp, op.Limit, op.N, now)
		return Result{Allowed: d.Allowed, Count: d.Count, Remaining: d.Remaining, RetryAfterMs: d.RetryAfterMs}
	case Reset:
		return Result{Existed: l.Store.Reset(op.Key, sp, now)}
	}
	return Result{Err: fmt.Errorf("%w: %v", ErrUnknownOp, op.Kind)}
}
