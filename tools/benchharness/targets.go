package benchharness

import (
	"fmt"
	"time"
)

// targetRow is one target of issue 10 and what this run measured against it.
type targetRow struct {
	name, want, got, status string
}

const notMeasured = "not measured"

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// boundStatus judges "below limit" for a value known only to lie in (lo, hi]: PASS or
// MISS when the whole bucket is on one side, "?" when it holds the limit (a histogram
// cannot tell; the estimate within it is a guess).
func boundStatus(lo, hi, limit time.Duration) string {
	switch {
	case hi < limit:
		return "PASS"
	case lo >= limit:
		return "MISS"
	}
	return "? (bucket holds the limit)"
}

// targets evaluates every target from the report's figures; each compares sides of
// one group, measured in the same run.
func (r *Report) targets() []targetRow {
	rows := []targetRow{
		r.rateTarget("SW.INCR unpipelined vs Redis INCR, nothing pinned", "p1/uniform/unpinned", "sw-incr-1", "redis-incr", 1.0),
		r.rateTarget("SW.INCR unpipelined vs Redis + Lua hash window, nothing pinned", "p1/uniform/unpinned", "sw-incr-1", "redis-hash", 2.0),
		r.rateTarget("SW.INCR unpipelined vs Redis INCR, per core", "p1/uniform/per core", "sw-incr-1", "redis-incr", 1.2),
		r.rateTarget("SW.INCR pipelined 16 vs Redis INCR, nothing pinned", "p16/uniform/unpinned", "sw-incr-1", "redis-incr", 1.0),
		r.rateTarget("SW.INCR pipelined 16 vs Redis INCR, per core", "p16/uniform/per core", "sw-incr-1", "redis-incr", 1.0),
		r.cpuTarget("HTTP /v1/allow: server CPU per request, nothing pinned", "p1/uniform/unpinned", "http-allow-1", 30*time.Microsecond),
		r.cpuTarget("HTTP /v1/allow: server CPU per request, per core", "p1/uniform/per core", "http-allow-1", 30*time.Microsecond),
		r.rateTarget("--redis, new keys, unpipelined: throughput vs no Redis", "redis/p1", "sw-incr-redis", "sw-incr-plain", 0.8),
		r.rateTarget("--redis, new keys, pipelined 16: throughput vs no Redis", "redis/p16", "sw-incr-redis", "sw-incr-plain", 0.8),
		r.forwardTarget(),
	}
	rows = append(rows, r.memTargets()...)
	rows = append(rows, r.writeBehindTargets()...)
	rows = append(rows, r.gcTarget(),
		r.latencyTarget("p99 latency, SW.INCR, one node, 50 connections unpipelined", "p1/uniform/unpinned", "sw-incr-1", time.Millisecond),
		r.latencyTarget("p99 latency, SW.ALLOW, one node, 50 connections unpipelined", "p1/uniform/unpinned", "sw-allow-1", time.Millisecond))
	rows = append(rows, r.rlsTargets()...)
	rows = append(rows, r.hotKeyTargets()...)
	return rows
}

// pair finds two sides of a group that both measured something.
func (r *Report) pair(groupID, a, b string) (*sideResult, *sideResult, bool) {
	g := r.group(groupID)
	if g == nil {
		return nil, nil, false
	}
	x, y := g.side(a), g.side(b)
	return x, y, x != nil && y != nil && x.ops > 0 && y.ops > 0
}

func (r *Report) rateTarget(name, groupID, a, b string, min float64) targetRow {
	row := targetRow{name: name, want: fmt.Sprintf("≥ %.1fx", min), got: notMeasured, status: "-"}
	x, y, ok := r.pair(groupID, a, b)
	if !ok {
		return row
	}
	q := ratio(x.rate(), y.rate())
	row.got = fmt.Sprintf("%s (%s vs %s ops/s)", fmtRatio(q), fmtRate(x.rate()), fmtRate(y.rate()))
	row.status = pass(q >= min)
	return row
}

func (r *Report) cpuTarget(name, groupID, id string, limit time.Duration) targetRow {
	return r.durationTarget(name, groupID, id, limit, func(x *sideResult) time.Duration { return x.cpuPerOp(x.serverCPU) })
}

func (r *Report) latencyTarget(name, groupID, id string, limit time.Duration) targetRow {
	return r.durationTarget(name, groupID, id, limit, func(x *sideResult) time.Duration { return x.lat.Quantile(0.99) })
}

// durationTarget compares what measure takes from one side with a limit.
func (r *Report) durationTarget(name, groupID, id string, limit time.Duration, measure func(*sideResult) time.Duration) targetRow {
	row := targetRow{name: name, want: "≤ " + fmtDur(limit), got: notMeasured, status: "-"}
	x, _, ok := r.pair(groupID, id, id)
	if !ok {
		return row
	}
	d := measure(x)
	row.got, row.status = fmtDur(d), pass(d <= limit)
	return row
}

// forwardTarget: a plain client entering three nodes through one costs the nodes, all
// together, at most 1.5 times the CPU per op of one node.
func (r *Report) forwardTarget() targetRow {
	row := targetRow{name: "Forwarding, plain client, 3 nodes via one: node CPU per op (all nodes) vs one node",
		want: "≤ 1.5x", got: notMeasured, status: "-"}
	x, y, ok := r.pair("p1/uniform/unpinned", "sw-incr-3", "sw-incr-1")
	if !ok {
		return row
	}
	cx, cy := x.cpuPerOp(x.serverCPU), y.cpuPerOp(y.serverCPU)
	q := ratio(float64(cx), float64(cy))
	row.got = fmt.Sprintf("%s (%s vs %s, unpipelined SW.INCR)", fmtRatio(q), fmtDur(cx), fmtDur(cy))
	row.status = pass(q <= 1.5)
	return row
}

// memTargets: RSS growth per live counter, leapcount over Redis, for each case.
func (r *Report) memTargets() []targetRow {
	var rows []targetRow
	for _, m := range r.mem {
		limit := 0.7
		if m.c.everyBucket {
			limit = 0.5
		}
		q := ratio(m.lc.perCounter(m.c.n), m.redis.perCounter(m.c.n))
		rows = append(rows, targetRow{
			name: "Memory, " + m.c.label() + ": RSS growth per counter vs Redis hash window",
			want: fmt.Sprintf("≤ %.1fx", limit),
			got: fmt.Sprintf("%s (%s vs %s; vs used_memory %s)", fmtRatio(q), fmtBytes(m.lc.perCounter(m.c.n)),
				fmtBytes(m.redis.perCounter(m.c.n)), fmtBytes(m.redis.usedPerCounter(m.c.n))),
			status: pass(q <= limit),
		})
	}
	if len(rows) == 0 {
		rows = append(rows, targetRow{name: "Memory vs Redis", got: notMeasured, status: "-"})
	}
	return rows
}

// gcTarget: the p99 of the pauses while the node served its largest set of counters
// (the steady phase; the loading phase when the steady one saw no collection).
func (r *Report) gcTarget() targetRow {
	row := targetRow{name: "GC pause p99", want: "< 1 ms", got: notMeasured, status: "-"}
	for _, m := range r.mem {
		if m.gc == nil {
			continue
		}
		s, stop, phase := m.gc.steady, m.gc.steadyStop, "steady load"
		if s.count == 0 {
			s, stop, phase = m.gc.load, m.gc.loadStop, "loading (no collection under the steady load)"
		}
		row.name = fmt.Sprintf("GC pause p99 with %s live counters", count(m.c.n))
		if !s.p99Known {
			row.got = "no collection"
			return row
		}
		row.got = fmt.Sprintf("≈ %s, in (%s, %s] (%d pauses, %s; stopping the world p99 ≈ %s)",
			fmtDur(s.p99), fmtDur(s.p99Lo), fmtDur(s.p99Hi), s.count, phase, fmtDur(stop.p99))
		row.status = boundStatus(s.p99Lo, s.p99Hi, time.Millisecond)
	}
	return row
}

// hotKeyTargets are issue 45's: one hot key through three nodes with --slices reaches
// at least 1.2x the throughput of spread keys, and more than without slices.
func (r *Report) hotKeyTargets() []targetRow {
	var rows []targetRow
	for _, fe := range hotKeyFrontEnds {
		g := "hotkey/" + fe.id
		rows = append(rows,
			r.rateTarget("one hot key through three nodes, "+fe.name+", --slices vs spread keys", g, "hot-sliced-"+fe.id, "hot-spread-"+fe.id, 1.2),
			r.rateTarget("one hot key through three nodes, "+fe.name+", --slices vs no slices", g, "hot-sliced-"+fe.id, "hot-plain-"+fe.id, 1.0))
	}
	return rows
}
