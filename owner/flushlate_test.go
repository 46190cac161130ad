package owner

import (
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// A reset taken back out of a batch while its partition's lease is not held (it waits
// in the queue, stripLateResets) goes before the counts queued for the counter since
// the batch was made: they came after it. Seed 784 of the simulation (with the
// borrower's changes of 2026-12-06) lost three acknowledged increments so: a reset
// decided while Redis was down waited in a batch, the three increments decided after it
// were queued when the counter left memory, and the reset, queued after them, erased
// them.
func TestAResetTakenBackGoesBeforeNewerCounts(t *testing.T) {
	_, st := startRedis(t)
	n := net{flush: time.Hour} // no flush of its own: the test makes the write-behind's state
	a := n.sole(t, "a", st)
	const key = "taken-back"
	p := ringOf("a").Partition(key)
	eventually(t, "partition owned", func() error {
		a.lock()
		defer a.unlock()
		if s := a.parts.get(p); s != Owned {
			return fmt.Errorf("partition %d is %v", p, s)
		}
		return nil
	})
	a.leases.grant(false, p) // its lease is ending, not lapsed: a reset waits for it in the queue
	ref := fallback.CounterRef{Key: key, Spec: sp}
	newer := []leaparray.Bucket{{Index: t0 / sp.BucketMs(), Count: 3}}
	a.lock()
	defer a.unlock()
	sb := &sentBatch{b: a.cfg.Redis.NewBatch(a.cfg.Writer, []fallback.Delta{{Key: key, Spec: sp, Reset: true}}),
		refs: []fallback.CounterRef{ref}}
	a.flush.batches = append(a.flush.batches, sb)
	a.flush.mu.Lock()
	a.flush.refs[ref]++
	a.flush.mu.Unlock()
	a.flush.enqueue([]fallback.Delta{{Key: key, Spec: sp, Buckets: newer}})
	a.stripLateResets(sb)
	a.flush.mu.Lock()
	defer a.flush.mu.Unlock()
	if len(a.flush.queue) != 1 {
		t.Fatalf("queue %+v; want one entry of %s", a.flush.queue, key)
	}
	got := a.flush.queue[0]
	if !got.Reset || len(got.Buckets) != 1 || got.Buckets[0] != newer[0] {
		t.Fatalf("queued %+v; want the reset, then the 3 counted after it", got)
	}
	if h := a.flush.refs[ref]; h != 2 {
		t.Errorf("%d holds on the counter; want 2 (the batch's, the queue's)", h)
	}
}
