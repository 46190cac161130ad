package fallback

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/leapcount/leapcount/leaparray"
)

// Delta is what happened to one counter since the last flush: whether it was reset,
// and what was added to it (after the reset), per bucket: the write-behind unit an owner
// sends every flush interval. A Reset delta deletes the counter's hash and then merges
// its buckets, in one step.
type Delta struct {
	Key     string
	Spec    leaparray.Spec
	Buckets []leaparray.Bucket
	Reset   bool
	// Base marks a counter's whole state but its pending deltas, with Reset, written
	// back after Redis lost its data (see the owner's writeBackInFull): its writer drops it,
	// rather than strip its reset, once its right to the counter has ended.
	Base bool
	// WriteBack marks a Base written back because Redis lost its data (not one that
	// stands for a reset handed in): its writer drops it once another node's late write
	// of the counter shows that its memory lacks that write, which its reset would erase.
	WriteBack bool
	// ResetBy, with Reset, is when the reset stops applying, on Redis's clock (µs since
	// the Unix epoch; 0: never): the end of its writer's right to the counter. Past it,
	// another node may have written the counter, so Redis merges the buckets without
	// the reset, or skips a Base whole, and the send reports it (Batch.LateResets).
	// Its writer sets it as it first sends (Batch.RedisTime tells it Redis's clock) and
	// keeps it: a send found applied before is late only if Redis's clock as it answered
	// is past it, and another send may have carried any deadline it was given.
	ResetBy int64
}

// CounterRef names one counter: its key and its shape.
type CounterRef struct {
	Key  string
	Spec leaparray.Spec
}

// FlushChunk is how many deltas SendBatch sends per pipeline round trip, at most (a
// round trip also carries at most flushPairs buckets): few enough that Redis runs a
// round trip's scripts well within the read timeout.
const FlushChunk = 2048

// flushPairs bounds the (bucket, count) pairs of one script call and of one round trip,
// so that a flush of large rings (3600 buckets) still makes short scripts. A counter
// with more pairs goes alone.
const flushPairs = 16384

// FlushError lists the deltas a send did not apply, by their index in the slice given
// to NewBatch and in that order. errors.Is sees every cause (counter.ErrUnavailable for
// Redis failures, ErrRedisDown for calls the open breaker refused).
type FlushError struct {
	Failed []int   // indexes into the deltas
	Errs   []error // Errs[i] is why Failed[i] failed; it names the counter when the fault is the counter's own
}

func (e *FlushError) add(i int, err error) {
	e.Failed = append(e.Failed, i)
	e.Errs = append(e.Errs, err)
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
	return fmt.Sprintf("fallback: %d deltas not flushed; first (delta %d): %v", len(e.Failed), e.Failed[0], e.Errs[0])
}

// Unwrap returns every cause, for errors.Is and errors.As.
func (e *FlushError) Unwrap() []error { return e.Errs }
