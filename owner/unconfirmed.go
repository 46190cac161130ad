package owner

import (
	"time"

	"github.com/leapcount/leapcount/leaparray"
)

// What the write-behind holds that Redis has not confirmed, for an operator's figures
// and for the simulation's checks of what a crash may lose.

// Unwritten reports how many counters have deltas Redis has not confirmed, and how many
// partitions' late-write marks are not written yet (not counting what the counters
// gained since the last flush, written at the next).
func (o *Owner) Unwritten() int {
	o.flush.mu.Lock()
	n := len(o.flush.refs)
	o.flush.mu.Unlock()
	return n + o.unmarkedCount()
}

// Flushes reports how many flushes have ended (tests and simulations wait for one).
func (o *Owner) Flushes() uint64 { return o.flush.rounds.Load() }

func sumBuckets(bs []leaparray.Bucket) uint64 {
	var n uint64
	for _, b := range bs {
		n += b.Count
	}
	return n
}

// WriteBehindStats are the write-behind's figures for an operator: the age of the
// oldest batch made and not yet confirmed (0: none waits), and the flushes that failed
// (Redis unreachable, or a batch not confirmed), whose batches go again.
func (o *Owner) WriteBehindStats() (oldest time.Duration, failed uint64) {
	o.lock()
	if len(o.flush.batches) > 0 {
		oldest = o.cfg.Clock.Since() - o.flush.batches[0].made
	}
	o.unlock()
	return oldest, o.flush.failed.Load()
}
