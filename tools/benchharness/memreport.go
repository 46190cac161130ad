package benchharness

import (
	"fmt"
	"strings"
	"time"
)

func (r *Report) memorySection() string {
	if len(r.mem) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Memory\n\n")
	b.WriteString("Each case starts a fresh node and a fresh redis-server, loads the same counters into each " +
		"(keys `m:0` … `m:<n-1>`, SW.INCR on the node, the hash-bucket window on Redis), and measures the " +
		"process's RSS growth over its baseline one second after the load; Redis also gives `used_memory` " +
		"(its allocator's count, without fragmentation), and the node its store's own count of bytes " +
		"(`leapcount_store_bytes`) and its Go heap in use after a forced collection (the live bytes, without " +
		"the garbage and the collector's headroom that RSS holds too). The node's own count of live counters " +
		"(`leapcount_counters`) and Redis's `DBSIZE` confirm that all are held.\n\n")
	var rows [][]string
	for _, m := range r.mem {
		rows = append(rows, memRow(m))
	}
	b.WriteString(table([]string{"case", "window", "leapcount RSS growth (per counter)", "live counters",
		"store bytes per counter", "Go heap after GC, growth per counter", "Redis RSS growth (per counter)", "Redis used_memory growth (per counter)", "keys",
		"RSS ratio", "load average"}, rows))
	b.WriteString("\n")
	for _, m := range r.mem {
		lc, n := m.lc, float64(m.c.n)
		fmt.Fprintf(&b, "- %s: the node's RSS grew %s per counter, of which %s live Go heap and %s of slabs mapped "+
			"outside the heap (`leapcount_store_mapped_bytes`, their capacity: pages never written are not resident); "+
			"the rest is garbage and the collector's headroom.\n",
			m.c.label(), fmtBytes(lc.perCounter(m.c.n)), fmtBytes(float64(lc.heap-lc.baseHeap)/n), fmtBytes(float64(lc.mapped)/n))
	}
	b.WriteString("\n")
	b.WriteString(r.loadingNotes())
	b.WriteString(r.gcSection())
	return b.String()
}

func memRow(m *memResult) []string {
	n := float64(m.c.n)
	lc, rd := m.lc, m.redis
	return []string{m.c.label(), m.c.shape.String(),
		fmt.Sprintf("%s (%s)", fmtBytes(float64(lc.rss-lc.baseRSS)), fmtBytes(lc.perCounter(m.c.n))),
		fmt.Sprint(lc.counters), fmtBytes(float64(lc.storeBytes) / n), fmtBytes(float64(lc.heap-lc.baseHeap) / n),
		fmt.Sprintf("%s (%s)", fmtBytes(float64(rd.rss-rd.baseRSS)), fmtBytes(rd.perCounter(m.c.n))),
		fmt.Sprintf("%s (%s)", fmtBytes(float64(rd.used-rd.baseUsed)), fmtBytes(rd.usedPerCounter(m.c.n))),
		fmt.Sprint(rd.keys), fmtRatio(ratio(lc.perCounter(m.c.n), rd.perCounter(m.c.n))), m.load}
}

// loadingNotes says how each case was loaded and how long it took.
func (r *Report) loadingNotes() string {
	var b strings.Builder
	b.WriteString("How each case was loaded:\n\n")
	for _, m := range r.mem {
		fmt.Fprintf(&b, "- %s: node %s (pipelined SW.INCR, 8 connections × 64)", m.c.label(), fmtDur(m.lc.load.Round(time.Millisecond)))
		if m.c.everyBucket {
			fmt.Fprintf(&b, ", %d passes, each started at a bucket boundary (slowest %s, %d ran past their bucket); "+
				"%d of %d sampled counters count every pass", len(m.lc.passes), fmtDur(slowest(m.lc.passes)), m.lc.late,
				m.lc.counted, m.lc.sampled)
		}
		fmt.Fprintf(&b, "; Redis %s (%s).\n", fmtDur(m.redis.load.Round(time.Millisecond)), m.redis.method)
	}
	c := r.loader
	fmt.Fprintf(&b, "\nThe loader was checked against hashwindow.lua at the start: one key through the script once in "+
		"each of %d buckets, another through the loader: same fields, values and MEMORY USAGE: %v (%d and %d bytes).\n\n",
		c.ScriptFields, c.Same, c.ScriptBytes, c.LoaderBytes)
	if !r.opts.Short {
		b.WriteString("Not measured: 10M counters with every bucket touched. Touching each of 10M counters in each of its " +
			"10 buckets is 100M operations, and for the node they must happen in real time (its clock cannot be " +
			"set from outside), one pass of 10M within each 6 s bucket, about 1.7M ops/s on this machine: neither fits " +
			"the ten minutes of a run. 1M counters with every bucket touched stand in for it. The 10M case uses a " +
			"10-minute window of 10 buckets rather than 60 s: loading 10M counters takes longer than 60 s here, " +
			"and a counter untouched for its window is forgotten; ten buckets cost the same in both systems " +
			"whatever the window (a ring of ten counts; ten small-integer hash fields).\n\n")
	}
	return b.String()
}

func slowest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func (r *Report) gcSection() string {
	for _, m := range r.mem {
		if m.gc == nil {
			continue
		}
		g := m.gc
		return fmt.Sprintf("### GC pauses with %s live counters\n\nFrom the node's `leapcount_gc_pause_seconds` (every "+
			"stop-the-world pause) and `leapcount_gc_pause_stopping_seconds` (the part of each spent stopping the world: "+
			"waiting for threads to reach a safe point, which the OS delays when the machine is overloaded), powers-of-two "+
			"buckets, quantiles interpolated within them; scraped before and after the load and after %s of SW.INCR "+
			"pipelined 16 deep from %d connections spread over the %s counters (%s ops/s). The load makes little garbage "+
			"(the counters are off the Go heap), so during it the harness also asked for a collection every %s "+
			"(`/debug/pprof/heap?gc=1`: runtime.GC, the same stop-the-world phases as any cycle; %d ran), for a p99 over "+
			"many pauses. %s The heap goal at the end was %s.\n\n",
			count(m.c.n), fmtDur(g.steadyFor), r.opts.Conns, count(m.c.n), fmtRate(g.steadyRate), fmtDur(forceEvery), g.forced,
			pinning(g.pinned), fmtBytes(g.heapGoal)) +
			table([]string{"phase", "pauses", "of which stopping"}, [][]string{
				{"loading", g.load.String(), g.loadStop.String()},
				{"steady load", g.steady.String(), g.steadyStop.String()},
			}) + fewPauses(g.steady.count)
	}
	return ""
}

// pinning says where the node and the load ran during the steady phase.
func pinning(pinned bool) string {
	if !pinned {
		return "The node and the load generator shared both CPUs (taskset was missing): a pause then includes " +
			"time slices the OS gave the generator while the world was stopped."
	}
	return fmt.Sprintf("During it the node ran on CPU %s (every thread, its GOMAXPROCS unchanged) and the load "+
		"generator on CPU %s, so that the OS did not hand the generator time slices while the node had stopped "+
		"the world.", serverCPU, clientCPU)
}

// fewPauses warns that a p99 of few pauses is about their maximum.
func fewPauses(n int) string {
	if n >= 100 {
		return "\n"
	}
	return fmt.Sprintf("\nThe steady phase saw %d pauses (two a collection): their p99 is about their slowest one, "+
		"and where the stopping part is most of it, the pause waited for threads the OS was not running.\n\n", n)
}
