package fallback

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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

// FlushChunk is how many counters' deltas FlushDeltas sends per pipeline round trip, at
// most (a round trip also carries at most flushPairs buckets): few enough that Redis
// runs a round trip's scripts well within the read timeout.
const FlushChunk = 2048

// flushPairs bounds the (bucket, count) pairs of one script call and of one round trip,
// so that a flush of large rings (3600 buckets) still makes short scripts. A delta with
// more pairs goes alone.
const flushPairs = 16384

// FlushDeltas merges many counters' deltas, each as Merge does (MergeOnce with a
// BatchID). Deltas without a BatchID are merged Config.FlushKeys counters per script
// call (in a Cluster, counters of one hash slot per call); a delta with a BatchID goes in
// its own call, with its marker. The calls are pipelined, FlushChunk counters per round
// trip. Each counter's delta is applied atomically; a failed delta does not stop the
// others. When some fail, the error is a *FlushError saying which: exactly those were
// not applied (except that a call whose reply was lost may have run; see FlushError).
func (st *Store) FlushDeltas(ctx context.Context, deltas []Delta) error {
	fe := &FlushError{}
	calls := st.planFlush(deltas, fe)
	for len(calls) > 0 {
		n, keys, pairs := 0, 0, 0
		for n < len(calls) && (n == 0 || keys+len(calls[n].owners) <= FlushChunk && pairs+calls[n].pairs <= flushPairs) {
			keys, pairs, n = keys+len(calls[n].owners), pairs+calls[n].pairs, n+1
		}
		trip := make([]call, n)
		for k := range trip {
			trip[k] = calls[k].call
		}
		for k, cmd := range st.runAll(ctx, trip) {
			calls[k].settle(cmd, deltas, fe)
		}
		calls = calls[n:]
	}
	if len(fe.Failed) == 0 {
		return nil
	}
	fe.sort()
	return fe
}

// FlushError lists the deltas FlushDeltas could not apply, by their index in the slice
// it was given and in that order, so that the caller can keep them for the next flush.
// A delta that failed on a timeout may have been applied all the same (the reply of its
// script call, which carried other deltas too, was lost): give deltas a BatchID when
// they are to be retried after such a failure. Deltas refused by the open breaker
// (ErrRedisDown) were certainly not applied. errors.Is sees every cause
// (counter.ErrUnavailable for Redis failures).
type FlushError struct {
	Failed []int   // indexes into the deltas
	Errs   []error // Errs[i] is why Failed[i] failed; it names the counter
}

func (e *FlushError) add(i int, d Delta, err error) {
	e.Failed = append(e.Failed, i)
	e.Errs = append(e.Errs, fmt.Errorf("counter %q (%dms/%d): %w", d.Key, d.Spec.WindowMs, d.Spec.Buckets, err))
}

// sort puts the failures in the order of the deltas.
func (e *FlushError) sort() {
	idx := make([]int, len(e.Failed))
	for k := range idx {
		idx[k] = k
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(e.Failed[a], e.Failed[b]) })
	failed, errs := make([]int, len(idx)), make([]error, len(idx))
	for k, i := range idx {
		failed[k], errs[k] = e.Failed[i], e.Errs[i]
	}
	e.Failed, e.Errs = failed, errs
}

func (e *FlushError) Error() string {
	return fmt.Sprintf("fallback: %d deltas not flushed; first: %v", len(e.Failed), e.Errs[0])
}

// Unwrap returns every cause, for errors.Is and errors.As.
func (e *FlushError) Unwrap() []error { return e.Errs }
