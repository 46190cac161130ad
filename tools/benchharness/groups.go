package benchharness

import (
	"context"
	"slices"
	"strconv"
	"time"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// keySpec is the key distribution of a group.
type keySpec struct {
	kind string // "uniform", "hot" or "new"
	n    int    // key space of uniform and hot
}

var (
	uniform = keySpec{kind: "uniform", n: uniformKeys}
	hot     = keySpec{kind: "hot", n: hotKeys}
	newKeys = keySpec{kind: "new"}
)

// keys is the distribution for one run of a side: its prefix, and for new keys a
// prefix of their own, so no run meets another's counters.
func (k keySpec) keys(prefix string, run int, seed uint64) lg.Keys {
	if k.kind == "new" {
		return lg.Unique{Prefix: prefix + "r" + strconv.Itoa(run) + ":"}
	}
	return lg.Uniform{Prefix: prefix, N: k.n, Seed: seed + uint64(run)}
}

func (k keySpec) label() string {
	switch k.kind {
	case "new":
		return "new keys (never seen)"
	case "hot":
		return "hot keys (" + strconv.Itoa(k.n) + ")"
	}
	return "uniform keys (" + strconv.Itoa(k.n) + ")"
}

// group is a set of sides measured together: each is run for the same time with the
// same load, one after the other and in alternating order round by round, so drifts in
// the machine's load fall on all of them alike and their ratios hold within the run.
type group struct {
	id       string // for targets: "p1/uniform/unpinned", ...
	title    string
	mode     string // "unpinned" or "per core"
	pipeline int
	keys     keySpec
	sides    []*side
	baseline string // the side the ratio column divides by
}

// sideResult sums one side's rounds.
type sideResult struct {
	side                 *side
	rates                []float64 // ops/s of each round
	ops, errs            int64
	firstErr             string
	failed               string // a run that broke (a connection lost): no figures
	lat                  lg.Hist
	serverCPU, clientCPU time.Duration
}

// rate is the median of the rounds' rates (the mean of two).
func (r *sideResult) rate() float64 { return median(r.rates) }

// cpuPerOp is CPU time over the operations of every round.
func (r *sideResult) cpuPerOp(d time.Duration) time.Duration {
	if r.ops == 0 {
		return 0
	}
	return d / time.Duration(r.ops)
}

// groupResult is a measured group and the machine's load around it.
type groupResult struct {
	group               *group
	sides               []*sideResult
	loadBefore, loadEnd string
}

func (g *groupResult) side(id string) *sideResult {
	for _, s := range g.sides {
		if s.side.id == id {
			return s
		}
	}
	return nil
}

// runGroup measures every side of g for the configured rounds, interleaved.
func (h *harness) runGroup(ctx context.Context, g *group) (*groupResult, error) {
	res := &groupResult{group: g, loadBefore: loadavg()}
	for _, s := range g.sides {
		res.sides = append(res.sides, &sideResult{side: s})
	}
	h.logf("%s: %d sides x %d rounds", g.title, len(g.sides), h.opts.Rounds)
	for r := range h.opts.Rounds {
		order := slices.Clone(res.sides)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, sr := range order {
			if err := h.measureSide(ctx, g, sr); err != nil {
				return nil, err
			}
		}
	}
	res.loadEnd = loadavg()
	return res, nil
}

// measureSide runs one round of one side and adds it to sr; only a cancelled run is
// an error, a broken one is recorded in the side.
func (h *harness) measureSide(ctx context.Context, g *group, sr *sideResult) error {
	s := sr.side
	var cpu0, cpu1 time.Duration
	h.runs++
	keys := g.keys
	if s.keys != nil {
		keys = *s.keys
	}
	res, err := lg.Run(ctx, lg.Config{
		Addr: s.addr, Addrs: s.addrs, Proto: s.proto, TLS: s.tls, Conns: h.opts.Conns, Pipeline: g.pipeline, Request: s.request,
		Keys:   keys.keys(s.prefix, h.runs, h.opts.Seed),
		Warmup: h.opts.Warmup, Duration: h.opts.Duration,
		Window: func(start bool) {
			if start {
				cpu0 = cpuOf(s.servers)
			} else {
				cpu1 = cpuOf(s.servers)
			}
		},
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		sr.failed = err.Error()
		h.logf("  %s: %v", s.name, err)
		return nil
	}
	sr.rates = append(sr.rates, res.Rate())
	sr.ops += res.Ops
	sr.errs += res.Errors
	if sr.firstErr == "" {
		sr.firstErr = res.FirstError
	}
	sr.lat.Merge(&res.Latency)
	sr.serverCPU += cpu1 - cpu0
	sr.clientCPU += res.ClientCPU
	h.logf("  %-40s %9.0f ops/s  p99 %v", s.name, res.Rate(), res.Latency.Quantile(0.99))
	return nil
}

func cpuOf(ps []*proc) time.Duration {
	var d time.Duration
	for _, p := range ps {
		d += p.CPU()
	}
	return d
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
