package fallback

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// Doer decides ops against Redis, as counter.Local does against the in-memory store: a
// node answers from Redis with it when a counter's owner cannot. It implements
// counter.Doer. The valid ops of one Do go in one pipeline; ops on one counter are
// decided in slice order. Redis failures come back as errors wrapping
// counter.ErrUnavailable, per op.
type Doer struct {
	Store  *Store
	Now    func() int64 // milliseconds since the Unix epoch
	Limits counter.Limits
}

var _ counter.Doer = (*Doer)(nil)

// Do decides each op in order. Invalid ops get their validation error and change nothing.
func (d *Doer) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	now := d.Now()
	calls := make([]call, 0, len(ops))
	owners := make([]int, 0, len(ops))
	for i := range ops {
		c, err := d.call(&ops[i], now)
		if err != nil {
			results[i] = counter.Result{Err: err}
			continue
		}
		calls, owners = append(calls, c), append(owners, i)
	}
	for k, cmd := range d.Store.runAll(ctx, calls) {
		results[owners[k]] = decodeResult(&ops[owners[k]], cmd, now)
	}
}

func (d *Doer) call(op *counter.Op, now int64) (call, error) {
	if err := d.Limits.Validate(op); err != nil {
		return call{}, err
	}
	sp := leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
	switch op.Kind {
	case counter.Incr:
		return d.Store.incrCall(op.Key, sp, op.N, now), nil
	case counter.Count:
		return d.Store.countCall(op.Key, sp, now), nil
	case counter.Allow:
		return d.Store.allowCall(op.Key, sp, op.Limit, op.N, now), nil
	case counter.Reset:
		return d.Store.resetCall(op.Key, sp, now), nil
	}
	return call{}, fmt.Errorf("%w: %v", counter.ErrUnknownOp, op.Kind)
}

func decodeResult(op *counter.Op, cmd *redis.Cmd, now int64) counter.Result {
	sp := leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
	switch op.Kind {
	case counter.Allow:
		dec, err := decodeDecision(cmd, sp, op.Limit, now)
		return counter.Result{Allowed: dec.Allowed, Count: dec.Count, Remaining: dec.Remaining,
			RetryAfterMs: dec.RetryAfterMs, Err: err}
	case counter.Reset:
		n, err := decodeInt(op.Kind.String(), cmd)
		return counter.Result{Existed: n == 1, Err: err}
	}
	n, err := decodeInt(op.Kind.String(), cmd)
	return counter.Result{Count: n, Err: err}
}
