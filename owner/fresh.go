package owner

import (
	"sync/atomic"
	"time"
)

// freshMargin is how far apart the nodes' wall clocks may be for the load skip below:
// a counter's buckets are stamped by the clock of the node that counted them.
const freshMargin = 5 * time.Second

// decidedSince is when (counters' clock, ms) this node began deciding a partition in
// its current state: the first op it decided there since the state last changed. Any
// change (lost, lapsed, reloaded, lent) starts it again.
type decidedSince struct {
	gen   atomic.Uint64 // the partition's generation + 1 it was taken in; 0: never
	since atomic.Int64
}

// noteDecided records that p is decided now, in its current generation. Called with
// decide held shared, so the generation cannot change meanwhile.
func (o *Owner) noteDecided(p int) {
	d := &o.parts.decided[p]
	g := o.parts.gen[p].Load() + 1
	if d.gen.Load() != g {
		d.since.Store(o.cfg.Now()) // before gen: who sees the new gen sees this since
		d.gen.Store(g)
	}
}

// knowsAllOf reports whether Redis can hold nothing in the window (windowMs) of a
// counter of partition p that is not in memory: this node has decided p without a
// break for longer than that window (plus freshMargin). Every write to Redis of p's
// counters since then was this node's, from counters in memory, and every earlier
// write is outside the window; so a counter not in memory is new, and its load from
// Redis can be skipped (issue: a flood of new keys cost a Redis round trip each).
func (o *Owner) knowsAllOf(p int, windowMs int64) bool {
	d := &o.parts.decided[p]
	if d.gen.Load() != o.parts.gen[p].Load()+1 {
		return false
	}
	return o.cfg.Now()-d.since.Load() > windowMs+freshMargin.Milliseconds()
}
