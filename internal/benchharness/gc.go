package benchharness

import (
	"context"
	"strconv"
	"time"

	lg "github.com/leapcount/leapcount/internal/loadgen"
)

// gcPauses is the node's histogram of GC stop-the-world pauses.
const gcPauses = "leapcount_gc_pause_seconds"

// gcResult is the GC pauses of a node holding a case's counters: while it loaded them,
// and while it then served a steady load on them.
type gcResult struct {
	load, steady pauseSummary
	steadyFor    time.Duration
	steadyRate   float64
	heapGoal     float64 // go_memstats_next_gc_bytes at the end: how far the heap may grow
}

// measureGC reads the pause histogram after the load, runs `steady` of unpipelined
// SW.INCR from 50 connections on the loaded counters (uniform over them), and reads
// it again.
func (h *harness) measureGC(ctx context.Context, n *nodeServer, c memCase, before histogram, steady time.Duration) (*gcResult, error) {
	afterLoad, err := h.metricsOf(n)
	if err != nil {
		return nil, err
	}
	h1 := afterLoad.histogramOf(gcPauses)
	req := lg.Command(lg.Str("SW.INCR"), lg.Key, lg.Str(c.shape.window()), lg.Str("BUCKETS"), lg.Str(strconv.Itoa(c.shape.buckets)))
	res, err := lg.Run(ctx, lg.Config{Addr: n.resp, Conns: h.opts.Conns, Pipeline: 1, Request: req,
		Keys: lg.Uniform{Prefix: "m:", N: c.n, Seed: h.opts.Seed}, Duration: steady})
	if err != nil {
		return nil, err
	}
	end, err := h.metricsOf(n)
	if err != nil {
		return nil, err
	}
	return &gcResult{
		load:       summarizePauses(h1.minus(before)),
		steady:     summarizePauses(end.histogramOf(gcPauses).minus(h1)),
		steadyFor:  steady,
		steadyRate: res.Rate(),
		heapGoal:   end["go_memstats_next_gc_bytes"],
	}, nil
}
