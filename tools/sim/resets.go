package sim

import (
	"fmt"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/history"
)

// resetHistory is what clients were told of one reset key: increments and resets, each
// with when it was sent and answered. A reset erases what came before it, so the final
// count is judged against the last acknowledged reset R: every increment answered
// before R was sent must be erased; every one acknowledged, sent after R was answered,
// must count; those in between, and those whose outcome is unknown (which may apply
// late), may or may not.
type resetHistory struct {
	ops  []resetOp
	loss int64
	// erasedBack is set when a fault may have brought back counts a reset erased: a
	// crash lost a reset not yet written, or a lapse split the counter between two
	// nodes, whose parts are added (without Redis) or written late (with Redis) after
	// the other's reset (docs/guarantees.md). The count may then be any of the
	// increments not known to have failed.
	erasedBack bool
}

type resetOp struct {
	kind       counter.Kind
	n          int64
	outcome    history.Outcome
	start, end time.Duration
}

func (h *resetHistory) add(o counter.Op, _ counter.Result, outcome history.Outcome, start, end time.Duration) {
	if o.Kind == counter.Incr || o.Kind == counter.Reset {
		h.ops = append(h.ops, resetOp{kind: o.Kind, n: o.N, outcome: outcome, start: start, end: end})
	}
}

// bounds are the counts the history allows at the end.
func (h *resetHistory) bounds() (lower, upper int64) {
	last := -1
	for i, o := range h.ops {
		if o.kind == counter.Reset && o.outcome == history.OK && (last < 0 || o.end > h.ops[last].end) {
			last = i
		}
	}
	unsure := false // a reset that may have applied after R: concurrent with it, or unknown
	for i, o := range h.ops {
		// (An unknown op may apply any time later: a frame read by an owner that was
		// frozen is decided then, long after its sender gave up.)
		if o.kind == counter.Reset && i != last && (o.outcome == history.Unknown ||
			o.outcome == history.OK && last >= 0 && o.end > h.ops[last].start) {
			unsure = true
		}
	}
	for _, o := range h.ops {
		if o.kind != counter.Incr || o.outcome == history.Failed {
			continue
		}
		if last >= 0 && o.outcome == history.OK && o.end < h.ops[last].start {
			continue // before R: erased
		}
		upper += o.n
		if o.outcome == history.OK && (last < 0 || o.start > h.ops[last].end) {
			lower += o.n
		}
	}
	if unsure {
		lower = 0
	}
	if h.erasedBack {
		upper = 0
		for _, o := range h.ops {
			if o.kind == counter.Incr && o.outcome != history.Failed {
				upper += o.n
			}
		}
	}
	return max(lower-h.loss, 0), upper
}

func (h *resetHistory) check(key string, final int64) error {
	lower, upper := h.bounds()
	if final < lower || final > upper {
		resets := 0
		var tail []string
		for _, o := range h.ops {
			if o.kind == counter.Reset {
				resets++
			}
			if o.end > h.ops[len(h.ops)-1].end-4*time.Second {
				tail = append(tail, fmt.Sprintf("%v n=%d %v [%.3f,%.3f]", o.kind, o.n, o.outcome, o.start.Seconds(), o.end.Seconds()))
			}
		}
		return fmt.Errorf("%s: count %d outside [%d, %d] that its %d ops (%d resets) allow; last ops: %v", key, final, lower, upper, len(h.ops), resets, tail)
	}
	return nil
}
