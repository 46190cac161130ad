package node

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// gcGoal keeps the collector's headroom in step with the store. The store's slabs are
// mapped outside the Go heap (leaparray's vec.go), so the heap the collector sees is a
// few MiB whatever the counters held, and GOGC alone collects it many times a second
// under load. gcGoal raises GOGC so that the heap may grow by 1/gcStoreShare of what is
// mapped before a collection, at a cost in RSS of about that share (garbage and
// headroom). A sixteenth keeps both pauses and RSS low in the memory section of make
// bench: GOGC alone pauses far more often, and a quarter costs more RSS per counter.
//
// The heap may also grow by what the node allocated in the last gcFloorEvery, up to
// most (--gc-headroom): with a small store a 3 MiB heap was collected some 60 times a
// second under ShouldRateLimit's load, the collector then a fifth of the node's CPU
// (make bench-rls). Tied to the allocation rate, it costs RSS only where the CPU it
// saves is spent; a fixed 32 MiB cost 40 bytes per counter in make bench's memory
// section, of 1M counters loaded over a minute.
type gcGoal struct {
	base    int   // GOGC the process was started with; negative (off): left alone
	most    int64 // the most the allocation rate may add to the headroom
	percent int   // GOGC set now
	sample  []metrics.Sample

	lastAllocs uint64    // the heap's allocations at the last update
	lastAt     time.Time // that update's time (zero: none yet)
}

const (
	gcStoreShare     = 16
	maxGCPercent     = 10_000
	gcGoalHysteresis = 8 // GOGC changes when it is off by more than 1/8
	// gcFloorEvery: the allocation rate alone brings a collection at most about this
	// often.
	gcFloorEvery = 250 * time.Millisecond
)

// startGCPercent is GOGC as the process started, read once: nodes of one process (tests)
// set GOGC in turn from the same process-wide figures.
var startGCPercent = sync.OnceValue(func() int {
	base := debug.SetGCPercent(100) // read it, then put it back
	debug.SetGCPercent(base)
	return base
})

func newGCGoal(most int64) *gcGoal {
	base := startGCPercent()
	return &gcGoal{base: base, most: max(most, 0), percent: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}}}
}

// rateFloor is the heap's growth allowed for allocs bytes allocated over elapsed: what
// it allocates in gcFloorEvery, at most most.
func rateFloor(allocs uint64, elapsed time.Duration, most int64) int64 {
	if elapsed <= 0 || most <= 0 {
		return 0
	}
	return int64(min(float64(allocs)*float64(gcFloorEvery)/float64(elapsed), float64(most)))
}

// gcPercentFor is the GOGC that lets a live heap grow by mapped/gcStoreShare or by
// floor, whichever is more, or base if that lets it grow more still.
func gcPercentFor(base int, floor, mapped, live int64) int {
	if p := max(mapped/gcStoreShare, floor) * 100 / live; p > int64(base) {
		return int(min(p, maxGCPercent))
	}
	return base
}

// update sets GOGC for mapped bytes held outside the heap, at now.
func (g *gcGoal) update(mapped int64, now time.Time) {
	if g.base < 0 {
		return
	}
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 || g.sample[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	live, allocs := int64(g.sample[0].Value.Uint64()), g.sample[1].Value.Uint64()
	var floor int64
	if !g.lastAt.IsZero() && allocs >= g.lastAllocs {
		floor = rateFloor(allocs-g.lastAllocs, now.Sub(g.lastAt), g.most)
	}
	g.lastAllocs, g.lastAt = allocs, now
	if live <= 0 {
		return
	}
	want := gcPercentFor(g.base, floor, mapped, live)
	if d := want - g.percent; d*gcGoalHysteresis > g.percent || -d*gcGoalHysteresis > g.percent {
		debug.SetGCPercent(want)
		g.percent = want
	}
}
