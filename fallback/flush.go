package fallback

import (
	"context"
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
)

// Delta is what one counter gained since the last flush, per bucket: the write-behind
// unit an owner sends every flush interval.
type Delta struct {
	Key     string
	Spec    leaparray.Spec
	Buckets []leaparray.Bucket
	// BatchID, when set, makes the delta apply once (as MergeOnce): a flush retried
	// after an unclear failure does not count twice. Each (counter, BatchID) costs a
	// marker key for Config.OnceTTL, so leave it empty when retries are not needed.
	BatchID string
}

// FlushChunk is how many deltas FlushDeltas sends per pipeline round trip.
const FlushChunk = 1000

// FlushDeltas merges many counters' deltas (as Merge, or MergeOnce with a BatchID),
// pipelining the script calls: one round trip per FlushChunk deltas instead of one per
// delta. Each delta is applied atomically; a failed delta does not stop the others. When
// some fail, the error is a *FlushError saying which.
func (st *Store) FlushDeltas(ctx context.Context, deltas []Delta) error {
	fe := &FlushError{}
	calls := make([]call, 0, min(len(deltas), FlushChunk))
	owners := make([]int, 0, cap(calls))
	flush := func() {
		for k, cmd := range st.runAll(ctx, calls) {
			if err := cmd.Err(); err != nil {
				fe.add(owners[k], deltas[owners[k]], unavailable("flush", err))
			}
		}
		calls, owners = calls[:0], owners[:0]
	}
	for i, d := range deltas {
		c, skip, err := st.mergeCall(d.Key, d.Spec, d.BatchID, d.Buckets)
		switch {
		case err != nil:
			fe.add(i, d, err)
		case !skip:
			calls, owners = append(calls, c), append(owners, i)
		}
		if len(calls) == FlushChunk {
			flush()
		}
	}
	flush()
	if len(fe.Failed) == 0 {
		return nil
	}
	return fe
}

// FlushError lists the deltas FlushDeltas could not apply, by their index in the slice
// it was given, so that the caller can keep them for the next flush. A delta that failed
// on a timeout may have been applied all the same (its reply was lost): give deltas a
// BatchID when they are to be retried. errors.Is sees every cause (counter.ErrUnavailable
// for Redis failures).
type FlushError struct {
	Failed []int   // indexes into the deltas
	Errs   []error // Errs[i] is why Failed[i] failed; it names the counter
}

func (e *FlushError) add(i int, d Delta, err error) {
	e.Failed = append(e.Failed, i)
	e.Errs = append(e.Errs, fmt.Errorf("counter %q (%dms/%d): %w", d.Key, d.Spec.WindowMs, d.Spec.Buckets, err))
}

func (e *FlushError) Error() string {
	return fmt.Sprintf("fallback: %d deltas not flushed; first: %v", len(e.Failed), e.Errs[0])
}

// Unwrap returns every cause, for errors.Is and errors.As.
func (e *FlushError) Unwrap() []error { return e.Errs }
