package benchharness

import (
	"fmt"
	"strings"
	"time"
)

// baseline is the memory section's result for the write-behind case (the same
// counters without Redis, and in Redis's hash window), or nil.
func (r *Report) baseline() *memResult {
	for _, m := range r.mem {
		if r.wb != nil && m.c == r.wb.c {
			return m
		}
	}
	return nil
}

// writeBehindTargets are issue 49's figures: the node's peak RSS with Redis against
// its RSS without, the drain's rate, and what a counter costs Redis's memory against
// the hash window.
func (r *Report) writeBehindTargets() []targetRow {
	flood := "--redis key flood"
	if r.wb != nil {
		flood += " (" + count(r.wb.c.n) + " new counters)"
	}
	peak := targetRow{name: flood + ": node's peak RSS vs no Redis", want: "≤ 1.5x", got: notMeasured, status: "-"}
	rate := targetRow{name: flood + ": counters written behind a second", want: "≥ 150k/s", got: notMeasured, status: "-"}
	used := targetRow{name: flood + ": Redis used_memory per counter vs the hash window's", want: "≤ 1.0x", got: notMeasured, status: "-"}
	back := targetRow{name: flood + ": node's RSS a minute after its counters expired vs before the flood", want: "≤ 1.5x", got: notMeasured, status: "-"}
	w, m := r.wb, r.baseline()
	if w == nil {
		return []targetRow{peak, rate, used, back}
	}
	if w.backRSS > 0 {
		q := ratio(float64(w.backRSS), float64(w.baseRSS))
		back.got = fmt.Sprintf("%s (%s vs %s; peak %s)", fmtRatio(q), fmtBytes(float64(w.backRSS)), fmtBytes(float64(w.baseRSS)), fmtBytes(float64(w.peakRSS)))
		back.status = pass(q <= 1.5)
	}
	rate.got = fmt.Sprintf("%s/s (%d in %s; redis-server %.0f%% of a core, %s of its CPU a counter; plain HSET and PEXPIRE, pipelined: %s)",
		fmtRate(w.drainRate()), w.unwritten, fmtDur(w.drain.Round(time.Millisecond)), 100*w.redisCPU.Seconds()/w.drain.Seconds(), fmtDur(w.redisCPUPer()),
		fmtDur(w.floor.cpuPer(w.c.n)))
	rate.status = pass(w.drainRate() >= 150_000)
	if m != nil {
		q := ratio(float64(w.peakRSS), float64(m.lc.rss))
		peak.got = fmt.Sprintf("%s (%s vs %s)", fmtRatio(q), fmtBytes(float64(w.peakRSS)), fmtBytes(float64(m.lc.rss)))
		peak.status = pass(q <= 1.5)
		u := ratio(w.usedPerCounter(), m.redis.usedPerCounter(m.c.n))
		used.got = fmt.Sprintf("%s (%s vs %s; MEMORY USAGE of one counter %d B vs %d B)", fmtRatio(u), fmtBytes(w.usedPerCounter()),
			fmtBytes(m.redis.usedPerCounter(m.c.n)), w.usage, w.floor.usage)
		used.status = pass(u <= 1.0)
	}
	return []targetRow{peak, rate, used, back}
}

func (r *Report) writeBehindSection() string {
	w := r.wb
	if w == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Write-behind: a key flood into a node with --redis\n\n")
	fmt.Fprintf(&b, "A fresh node with `--redis` and a fresh redis-server; the memory section's first case (%s, %s) "+
		"loaded the same way (pipelined SW.INCR, 8 connections × 64), then the write-behind drained "+
		"(`leapcount_writebehind_unwritten_counters` polled every 50 ms until 0). The node's RSS is sampled every "+
		"20 ms from before the load to the end of the drain, and once more a minute after the node held no counter "+
		"(`leapcount_counters` polled every second; the memory it gives back); CPU is each process's own (/proc). The baselines, "+
		"from the memory section of this run: the same counters in a node without Redis, and in Redis's hash window.\n\n",
		w.c.label(), w.c.shape)
	rows := [][]string{
		{"load", fmtDur(w.load.Round(time.Millisecond)), fmtRate(float64(w.c.n)/w.load.Seconds()) + " ops/s"},
		{"node RSS: before, peak", fmtBytes(float64(w.baseRSS)) + ", " + fmtBytes(float64(w.peakRSS)), ""},
		{"unwritten when the load ended", fmt.Sprint(w.unwritten), ""},
		{"drain", fmtDur(w.drain.Round(time.Millisecond)), fmtRate(w.drainRate()) + " counters/s"},
		{"CPU during the drain: redis-server, node", fmtDur(w.redisCPU.Round(time.Millisecond)) + ", " + fmtDur(w.nodeCPU.Round(time.Millisecond)),
			fmt.Sprintf("%.0f%%, %.0f%% of a core", 100*w.redisCPU.Seconds()/w.drain.Seconds(), 100*w.nodeCPU.Seconds()/w.drain.Seconds())},
		{"Redis used_memory growth", fmtBytes(float64(w.used - w.baseUsed)), fmtBytes(w.usedPerCounter()) + " a counter"},
		{"MEMORY USAGE of one counter (lc:{m:0}:…)", fmt.Sprintf("%d B", w.usage), "the key, its value and their headers, as the allocator rounds them"},
		{"Redis keys", fmt.Sprint(w.keys), "the counters and the node's own (its writer mark, the partition stamps)"},
		{"sampled counters in Redis holding their touch", fmt.Sprintf("%d of %d", w.inRedis, w.sampled), ""},
		{"until the node held no counter, after the drain", fmtDur(w.expiry.Round(time.Second)), "the window, then the sweeps"},
		{"node RSS a minute after that", fmtBytes(float64(w.backRSS)), fmt.Sprintf("%s of its RSS before the flood", fmtRatio(ratio(float64(w.backRSS), float64(w.baseRSS))))},
	}
	if m := r.baseline(); m != nil {
		rows = append(rows,
			[]string{"baseline: node without Redis, RSS after the load", fmtBytes(float64(m.lc.rss)), ""},
			[]string{"baseline: hash window, Redis used_memory growth", fmtBytes(float64(m.redis.used - m.redis.baseUsed)), fmtBytes(m.redis.usedPerCounter(m.c.n)) + " a counter"},
			[]string{"baseline: hash window, redis-server's CPU for the load", fmtDur(m.redis.cpu.Round(time.Millisecond)),
				fmtDur(m.redis.cpu/time.Duration(max(m.c.n, 1))) + " a counter (" + m.redis.method + ")"})
	}
	rows = append(rows,
		[]string{"floor: plain HSET of one field and PEXPIRE a counter, pipelined, into a fresh redis-server: its CPU",
			fmtDur(w.floor.cpu.Round(time.Millisecond)), fmtDur(w.floor.cpuPer(w.c.n)) + " a counter" + ceiling(w.floor.cpuPer(w.c.n))},
		[]string{"floor: MEMORY USAGE of one key (m:0)", fmt.Sprintf("%d B", w.floor.usage), "the hash window's form"})
	b.WriteString(table([]string{"", "measured", ""}, rows))
	b.WriteString("\n")
	return b.String()
}

// ceiling is what perCounter of one core's CPU allows a second, said after a figure.
func ceiling(perCounter time.Duration) string {
	if perCounter <= 0 {
		return ""
	}
	return "; at a full core, " + fmtRate(1/perCounter.Seconds()) + " counters/s at most"
}
