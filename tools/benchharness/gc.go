package benchharness

import (
	"context"
	"strconv"
	"time"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// The node's histograms of GC stop-the-world pauses, and of the part of each spent
// stopping (waiting for threads the OS may not be running).
const (
	gcPauses   = "leapcount_gc_pause_seconds"
	gcStopping = "leapcount_gc_pause_stopping_seconds"
)

// gcResult is the GC pauses of a node holding a case's counters: while it loaded them,
// and while it then served a steady load on them.
type gcResult struct {
	load, steady         pauseSummary
	loadStop, steadyStop pauseSummary // the stopping part of the same pauses
	steadyFor            time.Duration
	steadyRate           float64
	forced               int     // collections the harness asked for during the steady phase
	pinned               bool    // the node on serverCPU and the load on clientCPU during it
	heapGoal             float64 // go_memstats_next_gc_bytes at the end: how far the heap may grow
}

// measureGC reads the pause histograms after the load, runs `steady` of SW.INCR
// pipelined 16 deep from the usual connections on the loaded counters (uniform over
// them: the fastest load, so the most garbage and collections), and reads them again.
//
// With the counters off the Go heap, the load makes little garbage: a steady phase saw
// a handful of pauses, and their p99 was their slowest one. So the harness also asks
// for a collection every forceEvery during it (the profiler's /debug/pprof/heap?gc=1,
// which runs runtime.GC: the same stop-the-world phases as any cycle, with every
// counter live), for a p99 over about a hundred pauses.
//
// During it the node runs on serverCPU and this process on clientCPU (where taskset
// exists): on two cores shared with the load generator, the OS would deschedule the
// thread that has stopped the world for a time slice of the generator's (milliseconds),
// and the pause would measure the box's contention rather than the collector. A node
// in service has its clients on other machines.
func (h *harness) measureGC(ctx context.Context, n *nodeServer, c memCase, before metrics, steady time.Duration) (*gcResult, error) {
	afterLoad, err := h.metricsOf(n)
	if err != nil {
		return nil, err
	}
	req := lg.Command(lg.Str("SW.INCR"), lg.Key, lg.Str(c.shape.window()), lg.Str("BUCKETS"), lg.Str(strconv.Itoa(c.shape.buckets)))
	pinned, unpin := h.pinApart(n)
	defer unpin()
	forcing, stop := context.WithCancel(ctx)
	forced := make(chan int, 1)
	go func() { forced <- h.forceGCs(forcing, n) }()
	res, err := lg.Run(ctx, lg.Config{Addr: n.resp, Conns: h.opts.Conns, Pipeline: 16, Request: req,
		Keys: lg.Uniform{Prefix: "m:", N: c.n, Seed: h.opts.Seed}, Duration: steady})
	stop()
	nForced := <-forced
	if err != nil {
		return nil, err
	}
	end, err := h.metricsOf(n)
	if err != nil {
		return nil, err
	}
	between := func(name string, a, b metrics) pauseSummary {
		return summarizePauses(b.histogramOf(name).minus(a.histogramOf(name)))
	}
	return &gcResult{
		load:       between(gcPauses, before, afterLoad),
		loadStop:   between(gcStopping, before, afterLoad),
		steady:     between(gcPauses, afterLoad, end),
		steadyStop: between(gcStopping, afterLoad, end),
		steadyFor:  steady,
		steadyRate: res.Rate(),
		forced:     nForced,
		pinned:     pinned,
		heapGoal:   end["go_memstats_next_gc_bytes"],
	}, nil
}

// forceEvery is how often the steady phase asks the node for a collection.
const forceEvery = 150 * time.Millisecond

// forceGCs asks n for a collection every forceEvery until ctx ends, and returns how
// many it ran.
func (h *harness) forceGCs(ctx context.Context, n *nodeServer) int {
	t := time.NewTicker(forceEvery)
	defer t.Stop()
	ran := 0
	for {
		select {
		case <-ctx.Done():
			return ran
		case <-t.C:
			if _, err := h.get(n.http, "/debug/pprof/heap?gc=1"); err == nil {
				ran++
			}
		}
	}
}

// pinApart runs n on serverCPU and this process on clientCPU until unpin; pinned is
// false (and nothing moved) where taskset is missing or fails.
func (h *harness) pinApart(n *nodeServer) (pinned bool, unpin func()) {
	unpinNode, err := pin(n.Pid(), serverCPU)
	if err != nil {
		h.logf("GC: the node stays unpinned: %v", err)
		return false, func() {}
	}
	restore, err := pinSelf(clientCPU)
	if err != nil {
		h.logf("GC: the load stays unpinned: %v", err)
		unpinNode()
		return false, func() {}
	}
	return true, func() { restore(); unpinNode() }
}
