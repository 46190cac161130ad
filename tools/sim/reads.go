package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/history"
)

// readLog judges the answers of count ops on the increment keys as they were given, not
// only the final count: a counter decided from memory that lacks part of it (a lend
// ended early, a load that missed a write) answers short while it lasts, and may be
// whole again by the end. A count sent at s and answered at e must be at least what was
// acknowledged before s, less what faults may have lost or kept out of the deciding
// node's memory meanwhile (loss, lack), and at most what was sent before e and not
// known to have failed, plus what faults may have counted twice (extra). The allowances
// are the run's totals: a fault that explains a short answer may be noted after it (a
// late write is seen when it lands).
type readLog struct {
	incrs map[string][]timedIncr
	reads map[string][]timedRead
	lack  map[string]int64 // counts a decider's memory may have lacked for a while
}

type timedIncr struct {
	n          int64
	outcome    history.Outcome
	start, end time.Duration
}

type timedRead struct {
	count      int64
	start, end time.Duration
}

func newReadLog() readLog {
	return readLog{incrs: map[string][]timedIncr{}, reads: map[string][]timedRead{}, lack: map[string]int64{}}
}

func (r *readLog) incr(key string, n int64, o history.Outcome, start, end time.Duration) {
	r.incrs[key] = append(r.incrs[key], timedIncr{n: n, outcome: o, start: start, end: end})
}

func (r *readLog) read(key string, count int64, start, end time.Duration) {
	r.reads[key] = append(r.reads[key], timedRead{count: count, start: start, end: end})
}

// mayLack notes that the memory deciding key may lack n of its counts for a while.
func (r *readLog) mayLack(key string, n int64) {
	if n > 0 {
		r.lack[key] += n
	}
}

// check returns one line per count answer out of its bounds.
func (r *readLog) check(b history.Bounds) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(r.reads)) {
		for _, rd := range r.reads[key] {
			var acked, possible int64
			for _, in := range r.incrs[key] {
				if in.outcome == history.OK && in.end < rd.start {
					acked += in.n
				}
				if in.outcome != history.Failed && in.start <= rd.end {
					possible += in.n
				}
			}
			lo := acked - b.KeyLoss[key] - r.lack[key]
			hi := possible + b.KeyExtra[key]
			if rd.count < lo || rd.count > hi {
				out = append(out, fmt.Sprintf("%s: count answered %d at %.3fs, outside [%d, %d] (acknowledged before it %d, allowed loss %d, lack %d; sent and not failed before its answer %d, extra %d)",
					key, rd.count, rd.end.Seconds(), lo, hi, acked, b.KeyLoss[key], r.lack[key], possible, b.KeyExtra[key]))
				break // the first is the story; the rest follow from it
			}
		}
	}
	return out
}
