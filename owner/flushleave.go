package owner

import (
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// Counters leaving memory: what of their write-behind travels with them (never sent) and
// what stays (sent and not answered), and the deltas they had not yet written.

// takeUnsent removes from the write-behind the deltas of refs that were never sent to
// Redis, and returns them: their counters travel to another node with them, which
// writes them. Deltas that were sent and not answered stay: they may have been applied,
// and only sending them again with their once-ID can tell. The caller holds mu, and no
// flush is in flight (what is unsent stays so).
func (o *Owner) takeUnsent(refs []fallback.CounterRef) map[fallback.CounterRef][]fallback.Delta {
	f := &o.flush
	f.mu.Lock()
	defer f.mu.Unlock()
	want := make(map[fallback.CounterRef]bool, len(refs))
	for _, r := range refs {
		want[r] = true
	}
	out := map[fallback.CounterRef][]fallback.Delta{}
	var back []fallback.Delta
	rg := o.ring.Load()
	for i := range f.batches {
		taken := f.batches[i].b.TakeUnsent()
		f.batches[i].refs = without(f.batches[i].refs, taken)
		taken, dropped := withoutLateResets(taken, f.batches[i].lapsed, rg)
		f.unref(dropped)
		for _, d := range taken {
			if want[refOf(d)] {
				out[refOf(d)] = append(out[refOf(d)], d)
			} else {
				back = append(back, d)
			}
		}
	}
	kept := back
	for _, d := range f.queue {
		if want[refOf(d)] {
			out[refOf(d)] = append(out[refOf(d)], d)
		} else {
			kept = append(kept, d)
		}
	}
	f.queue = kept
	f.reindexQueue()
	for _, ds := range out {
		for _, d := range ds {
			f.unref([]fallback.CounterRef{refOf(d)})
		}
	}
	return out
}

// without removes from refs one entry per delta taken.
func without(refs []fallback.CounterRef, taken []fallback.Delta) []fallback.CounterRef {
	n := map[fallback.CounterRef]int{}
	for _, d := range taken {
		n[refOf(d)]++
	}
	kept := refs[:0:0]
	for _, r := range refs {
		if n[r] > 0 {
			n[r]--
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func refsOf(ds []fallback.Delta) []fallback.CounterRef {
	out := make([]fallback.CounterRef, len(ds))
	for i, d := range ds {
		out[i] = refOf(d)
	}
	return out
}

// pendingOf is the write-behind of counters taken out of memory: what each had not yet
// written, and whether a reset was not yet written.
func pendingOf(ev []leaparray.Evicted) []fallback.Delta {
	var out []fallback.Delta
	for _, e := range ev {
		if len(e.Pending) > 0 || e.Reset {
			out = append(out, fallback.Delta{Key: e.Key, Spec: e.Spec, Buckets: e.Pending, Reset: e.Reset})
		}
	}
	return out
}
