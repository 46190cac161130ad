package benchharness

import (
	"context"
	"fmt"
	"time"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// memShape is the counters' window and bucket count.
type memShape struct {
	windowMs int64
	buckets  int
}

func (s memShape) bucketMs() int64 { return s.windowMs / int64(s.buckets) }

func (s memShape) window() string { return fmt.Sprintf("%dms", s.windowMs) }

func (s memShape) String() string {
	return fmt.Sprintf("%s / %d buckets", time.Duration(s.windowMs)*time.Millisecond, s.buckets)
}

// memCase is one memory measurement: n counters, each touched once or in every bucket.
type memCase struct {
	n           int
	everyBucket bool
	shape       memShape
	viaLoader   bool // Redis loaded with loaderRequest rather than a script call per touch
	gc          bool // measure the node's GC pauses with these counters
}

func (c memCase) touches() int {
	if c.everyBucket {
		return c.shape.buckets
	}
	return 1
}

func (c memCase) label() string {
	if c.everyBucket {
		return fmt.Sprintf("%s counters, every bucket touched", count(c.n))
	}
	return fmt.Sprintf("%s counters, each touched once", count(c.n))
}

// lcMemory is what a node held after a load.
type lcMemory struct {
	baseRSS, rss int64
	counters     int64 // leapcount_counters after the load: the live counters
	storeBytes   int64 // leapcount_store_bytes: what the counters' slabs hold
	mapped       int64 // leapcount_store_mapped_bytes: the part of it mapped outside the Go heap
	load         time.Duration
	passes       []time.Duration // every-bucket: each pass's time
	late         int             // passes that ran past their bucket
	counted      int             // of the sampled counters, those counting every touch
	sampled      int
	before       metrics // the node's metrics before the load (GC pauses so far)
	// Go heap in use after a forced collection, before and after the load: the
	// counters' live bytes without the garbage and slack RSS also holds.
	baseHeap, heap int64
}

// redisMemory is what a redis-server held after the same load.
type redisMemory struct {
	baseRSS, rss   int64
	baseUsed, used int64 // INFO used_memory
	keys           int64 // DBSIZE after the load
	load           time.Duration
	cpu            time.Duration // redis-server's during the load
	method         string
}

// memResult is one case, both sides.
type memResult struct {
	c     memCase
	lc    lcMemory
	redis redisMemory
	gc    *gcResult // with the largest touched-once case
	load  string
}

// perCounter is the RSS growth per live counter.
func (m *lcMemory) perCounter(n int) float64 { return float64(m.rss-m.baseRSS) / float64(n) }

func (m *redisMemory) perCounter(n int) float64 { return float64(m.rss-m.baseRSS) / float64(n) }

func (m *redisMemory) usedPerCounter(n int) float64 { return float64(m.used-m.baseUsed) / float64(n) }

// runMemCase measures one case: a fresh node, loaded and measured, then stopped; then a
// fresh redis-server, the same.
func (h *harness) runMemCase(ctx context.Context, c memCase, gcSteady time.Duration) (*memResult, error) {
	res := &memResult{c: c, load: loadavg()}
	h.logf("memory: %s (%s)", c.label(), c.shape)
	nodes, err := h.startNodes("mem", 1, nodeOpts{})
	if err != nil {
		return nil, err
	}
	lc, err := h.loadNode(ctx, nodes[0], c)
	if err == nil && gcSteady > 0 {
		res.gc, err = h.measureGC(ctx, nodes[0], c, lc.before, gcSteady)
	}
	h.procs.stopSome(nodes[0].proc)
	if err != nil {
		return nil, err
	}
	res.lc = lc
	if res.redis, err = h.loadRedis(ctx, c); err != nil {
		return nil, err
	}
	return res, nil
}

// loadNode loads the case's counters into a fresh node and measures it.
func (h *harness) loadNode(ctx context.Context, n *nodeServer, c memCase) (lcMemory, error) {
	var m lcMemory
	time.Sleep(500 * time.Millisecond) // let the new process settle before its baseline
	m.baseRSS = n.RSS()
	met, err := h.metricsOf(n)
	if err != nil {
		return m, err
	}
	m.before = met
	if m.baseHeap, err = h.heapAfterGC(n); err != nil {
		return m, err
	}
	req := lg.Command(lg.Str("SW.INCR"), lg.Key, lg.Str(c.shape.window()), lg.Str("BUCKETS"), lg.Str(fmt.Sprint(c.shape.buckets)))
	start := time.Now()
	for pass := range c.touches() {
		if c.everyBucket {
			waitNextBucket(c.shape.bucketMs())
		}
		t0 := time.Now()
		if _, err := lg.Run(ctx, loadConfig(n.resp, req, c.n)); err != nil {
			return m, fmt.Errorf("loading node, pass %d: %w", pass, err)
		}
		m.passes = append(m.passes, time.Since(t0))
		if c.everyBucket && time.Now().UnixMilli()/c.shape.bucketMs() != t0.UnixMilli()/c.shape.bucketMs() {
			m.late++
		}
	}
	m.load = time.Since(start)
	// Sampled at once: a bucket later, the first pass's bucket has left the window.
	m.counted, m.sampled = h.sampleCounts(ctx, n, c)
	time.Sleep(time.Second) // replies are in; let the last allocations land
	m.rss = n.RSS()
	if met, err = h.metricsOf(n); err != nil {
		return m, err
	}
	m.counters, m.storeBytes = int64(met["leapcount_counters"]), int64(met["leapcount_store_bytes"])
	m.mapped = int64(met["leapcount_store_mapped_bytes"])
	m.heap, err = h.heapAfterGC(n)
	return m, err
}

// heapAfterGC has the node collect (its profiler's heap?gc=1 runs runtime.GC) and
// reads the heap in use.
func (h *harness) heapAfterGC(n *nodeServer) (int64, error) {
	if _, err := h.get(n.http, "/debug/pprof/heap?gc=1"); err != nil {
		return 0, err
	}
	met, err := h.metricsOf(n)
	if err != nil {
		return 0, err
	}
	return int64(met["go_memstats_heap_inuse_bytes"]), nil
}

// loadConfig loads n counters m:0 .. m:n-1 once each, with deep pipelines on a few
// connections: the fastest way to fill a server, the same for both sides.
func loadConfig(addr string, req lg.Request, n int) lg.Config {
	return lg.Config{Addr: addr, Conns: 8, Pipeline: 64, Request: req, Keys: lg.Range{Prefix: "m:", N: n}}
}

// waitNextBucket sleeps until just after the next bucket boundary, so a pass starts at
// the beginning of its bucket.
func waitNextBucket(bucketMs int64) {
	now := time.Now().UnixMilli()
	next := (now/bucketMs + 1) * bucketMs
	time.Sleep(time.Duration(next-now+20) * time.Millisecond)
}

func (h *harness) metricsOf(n *nodeServer) (metrics, error) {
	body, err := h.get(n.http, "/metrics")
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(body)), nil
}

// sampleCounts asks a node for 100 of the loaded counters and says how many count
// every touch the load gave them (10 when every bucket was touched in its own bucket).
func (h *harness) sampleCounts(ctx context.Context, n *nodeServer, c memCase) (counted, sampled int) {
	cl := newRedisClient(n.resp)
	defer cl.Close()
	step := max(c.n/100, 1)
	for i := 0; i < c.n; i += step {
		v, err := cl.Do(ctx, "SW.COUNT", fmt.Sprintf("m:%d", i), c.shape.window(), "BUCKETS", c.shape.buckets).Int64()
		sampled++
		if err == nil && v == int64(c.touches()) {
			counted++
		}
	}
	return counted, sampled
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
