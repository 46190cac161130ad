package node

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcGoal keeps the collector's headroom in step with the store. The store's slabs are
// mapped outside the Go heap (leaparray's vec.go), so the heap the collector sees is a
// few MiB whatever the counters held, and GOGC alone collects it many times a second
// under load. gcGoal raises GOGC so that the heap may grow by 1/gcStoreShare of what is
// mapped before a collection, at a cost in RSS of about that share (garbage and
// headroom). A sixteenth keeps both pauses and RSS low in the memory section of make
// bench: GOGC alone pauses far more often, and a quarter costs more RSS per counter.
type gcGoal struct {
	base    int // GOGC the process was started with; negative (off): left alone
	percent int // GOGC set now
	sample  []metrics.Sample
}

const (
	gcStoreShare     = 16
	maxGCPercent     = 10_000
	gcGoalHysteresis = 8 // GOGC changes when it is off by more than 1/8
)

// startGCPercent is GOGC as the process started, read once: nodes of one process (tests)
// set GOGC in turn from the same process-wide figures.
var startGCPercent = sync.OnceValue(func() int {
	base := debug.SetGCPercent(100) // read it, then put it back
	debug.SetGCPercent(base)
	return base
})

func newGCGoal() *gcGoal {
	base := startGCPercent()
	return &gcGoal{base: base, percent: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// gcPercentFor is the GOGC that lets a live heap grow by mapped/gcStoreShare, or base if
// that lets it grow more.
func gcPercentFor(base int, mapped, live int64) int {
	if p := mapped / gcStoreShare * 100 / live; p > int64(base) {
		return int(min(p, maxGCPercent))
	}
	return base
}

// update sets GOGC for mapped bytes held outside the heap.
func (g *gcGoal) update(mapped int64) {
	if g.base < 0 {
		return
	}
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	live := int64(g.sample[0].Value.Uint64())
	if live <= 0 {
		return
	}
	want := gcPercentFor(g.base, mapped, live)
	if d := want - g.percent; d*gcGoalHysteresis > g.percent || -d*gcGoalHysteresis > g.percent {
		debug.SetGCPercent(want)
		g.percent = want
	}
}
