package benchharness

import "time"

// plan is what a run measures: the full plan of `make bench`, or the short one.
type plan struct {
	modes          []mode
	redisPipelines []int // the --redis comparison's pipeline depths
	mem            []memCase
	gcSteady       time.Duration // steady load on the GC case's counters
}

// mode is a way of placing the processes on the cores, and what is measured in it.
type mode struct {
	name   string // "unpinned" or "per core"
	pinned bool
	cells  []cell
}

// cell is one group's load: a pipeline depth and a key distribution.
type cell struct {
	pipeline int
	keys     keySpec
}

var (
	full60s = memShape{windowMs: 60_000, buckets: 10}
	// tenMin holds 10M counters: loading them takes longer than 60 s here, and a
	// counter untouched for its window is forgotten. Ten buckets cost the same in both
	// systems whatever the window (a ring of ten counts; ten small-integer fields).
	tenMin = memShape{windowMs: 600_000, buckets: 10}
)

func fullPlan() plan {
	all := []cell{{1, uniform}, {1, hot}, {16, uniform}, {16, hot}}
	return plan{
		modes:          []mode{{name: "unpinned", cells: all}, {name: "per core", pinned: true, cells: all}},
		redisPipelines: []int{1, 16},
		// 10M counters touched in every bucket would take 100M operations, which the
		// ten minutes of a run cannot hold (see BENCHMARKS.md); 1M can: ten passes of
		// 1M, one in each 6 s bucket.
		mem: []memCase{
			{n: 1_000_000, shape: full60s},
			{n: 1_000_000, shape: full60s, everyBucket: true, viaLoader: true},
			{n: 10_000_000, shape: tenMin, viaLoader: true, gc: true},
		},
		gcSteady: 10 * time.Second,
	}
}

// shortPlan checks every part of the harness in under two minutes: fewer groups, one
// round, 100k counters, and every bucket touched in a 10 s window (1 s buckets) rather
// than 60 s.
func shortPlan() plan {
	return plan{
		modes: []mode{
			{name: "unpinned", cells: []cell{{1, uniform}, {16, uniform}, {1, hot}}},
			{name: "per core", pinned: true, cells: []cell{{1, uniform}}},
		},
		redisPipelines: []int{1},
		mem: []memCase{
			{n: 100_000, shape: full60s, gc: true},
			{n: 100_000, shape: memShape{windowMs: 10_000, buckets: 10}, everyBucket: true, viaLoader: true},
		},
		gcSteady: 3 * time.Second,
	}
}
