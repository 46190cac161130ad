package benchharness

import (
	"context"
	"fmt"
	"sync"
	"time"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// wbResult is a key flood into a node with --redis, and its write-behind: the memory
// section's first case (its counters, loaded the same way), so that the node without
// Redis and the hash window in Redis, measured there in the same run, are its baselines.
type wbResult struct {
	c                 memCase
	load              time.Duration
	baseRSS, peakRSS  int64 // the node's, from its start to the end of the drain
	unwritten         int64 // counters not yet in Redis when the load ended
	drain             time.Duration
	redisCPU, nodeCPU time.Duration // during the drain
	baseUsed, used    int64         // Redis used_memory before the load and after the drain
	keys              int64         // DBSIZE after the drain
	inRedis, sampled  int           // sampled counters whose Redis hash holds their touch
	expiry            time.Duration // from the drain's end until the node held no counter
	backRSS           int64         // the node's RSS a minute after it held no counter
	usage             int64         // MEMORY USAGE of one of its counters in Redis
	floor             redisFloor
}

// redisFloor is what the same new counters cost a fresh redis-server written the
// cheapest way a hash per counter can be: one HSET of one field and a PEXPIRE each,
// pipelined, with no script (the hash window's form, without its reads). It bounds
// any write-behind that keeps a hash per counter, so it tells how much of the drain's
// cost is Redis's own.
type redisFloor struct {
	cpu   time.Duration // redis-server's during the load
	load  time.Duration
	usage int64 // MEMORY USAGE of one of its keys
}

// cpuPer is redis-server's CPU per counter of the floor's load.
func (f redisFloor) cpuPer(n int) time.Duration {
	if n == 0 {
		return 0
	}
	return f.cpu / time.Duration(n)
}

// drainRate is the counters written behind a second after the load ended.
func (w *wbResult) drainRate() float64 { return float64(w.unwritten) / w.drain.Seconds() }

// redisCPUPer is redis-server's CPU per counter written behind during the drain.
func (w *wbResult) redisCPUPer() time.Duration {
	if w.unwritten == 0 {
		return 0
	}
	return w.redisCPU / time.Duration(w.unwritten)
}

func (w *wbResult) usedPerCounter() float64 { return float64(w.used-w.baseUsed) / float64(w.c.n) }

// runWriteBehind floods a fresh node with --redis (and a fresh redis-server) with the
// case's new counters, then waits for its write-behind to drain, sampling the node's
// RSS throughout.
func (h *harness) runWriteBehind(ctx context.Context, c memCase) (*wbResult, error) {
	w := &wbResult{c: c}
	h.logf("write-behind: %s into a node with --redis", c.label())
	r, err := h.startRedis("redis-wb", "")
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(r.proc)
	defer r.client.Close()
	nodes, err := h.startNodes("wb", 1, nodeOpts{extra: []string{"--redis", "redis://" + r.addr}})
	if err != nil {
		return nil, err
	}
	n := nodes[0]
	defer h.procs.stopSome(n.proc)
	time.Sleep(500 * time.Millisecond) // let the new processes settle before their baselines
	w.baseRSS, w.baseUsed = n.RSS(), usedMemory(ctx, r.client)
	stop := peakRSS(n.proc, &w.peakRSS)
	req := lg.Command(lg.Str("SW.INCR"), lg.Key, lg.Str(c.shape.window()), lg.Str("BUCKETS"), lg.Str(fmt.Sprint(c.shape.buckets)))
	start := time.Now()
	_, err = lg.Run(ctx, loadConfig(n.resp, req, c.n))
	w.load = time.Since(start)
	if err != nil {
		stop()
		return nil, fmt.Errorf("flooding the node: %w", err)
	}
	redis0, node0, t0 := r.CPU(), n.CPU(), time.Now()
	w.unwritten, err = h.drainWriteBehind(ctx, n)
	w.drain, w.redisCPU, w.nodeCPU = time.Since(t0), r.CPU()-redis0, n.CPU()-node0
	stop()
	if err != nil {
		return nil, err
	}
	w.used = usedMemory(ctx, r.client)
	w.keys, _ = r.client.DBSize(ctx).Result()
	w.usage, _ = r.client.MemoryUsage(ctx, fmt.Sprintf("lc:{m:0}:%d:%d", c.shape.windowMs, c.shape.buckets)).Result()
	w.inRedis, w.sampled = sampleInRedis(ctx, r, c)
	if w.expiry, err = h.waitExpired(ctx, n, c.shape.windowMs); err != nil {
		return nil, err
	}
	select { // a minute for the node to give the memory back (issue 49): a span, not a condition
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
	}
	w.backRSS = n.RSS()
	w.floor, err = h.runRedisFloor(ctx, c)
	return w, err
}

// runRedisFloor writes the case's counters into a fresh redis-server as redisFloor
// says and measures its CPU.
func (h *harness) runRedisFloor(ctx context.Context, c memCase) (redisFloor, error) {
	var f redisFloor
	h.logf("write-behind: the same %s as plain HSET and PEXPIRE into Redis", c.label())
	r, err := h.startRedis("redis-floor", "")
	if err != nil {
		return f, err
	}
	defer h.procs.stopSome(r.proc)
	defer r.client.Close()
	time.Sleep(500 * time.Millisecond) // let the new process settle
	start, cpu0 := time.Now(), r.CPU()
	if err := runLoader(ctx, r.addr, c, nowMs()/c.shape.bucketMs(), 1, "m:"); err != nil {
		return f, fmt.Errorf("the floor's load: %w", err)
	}
	f.load, f.cpu = time.Since(start), r.CPU()-cpu0
	f.usage, _ = r.client.MemoryUsage(ctx, "m:0").Result()
	return f, nil
}

// waitExpired polls the node's counters until it holds none (their window and three
// minutes at most) and returns how long that took.
func (h *harness) waitExpired(ctx context.Context, n *nodeServer, windowMs int64) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(time.Duration(windowMs)*time.Millisecond + 3*time.Minute)
	for {
		met, err := h.metricsOf(n)
		if err != nil {
			return 0, err
		}
		held := int64(met["leapcount_counters"])
		if held == 0 {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("write-behind: the node still holds %d counters %v after the drain", held, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// drainWriteBehind polls the node's unwritten counters until none is left (two
// minutes at most) and returns how many there were when it began.
func (h *harness) drainWriteBehind(ctx context.Context, n *nodeServer) (first int64, err error) {
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		met, err := h.metricsOf(n)
		if err != nil {
			return first, err
		}
		left := int64(met["leapcount_writebehind_unwritten_counters"])
		if i == 0 {
			first = left
		}
		if left == 0 {
			return first, nil
		}
		if time.Now().After(deadline) {
			return first, fmt.Errorf("write-behind: %d of %d counters still unwritten after 2 minutes", left, first)
		}
		select {
		case <-ctx.Done():
			return first, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// peakRSS samples p's RSS every 20 ms into *peak until the returned stop is called.
func peakRSS(p *proc, peak *int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			*peak = max(*peak, p.RSS())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// sampleInRedis reads 100 of the flood's counters straight from Redis (their hash's
// sum, the field s of lc:{<key>}:<windowMs>:<buckets>) and counts those that hold
// their one touch.
func sampleInRedis(ctx context.Context, r *redisServer, c memCase) (held, sampled int) {
	step := max(c.n/100, 1)
	for i := 0; i < c.n; i += step {
		key := fmt.Sprintf("lc:{m:%d}:%d:%d", i, c.shape.windowMs, c.shape.buckets)
		v, err := r.client.HGet(ctx, key, "s").Int64()
		sampled++
		if err == nil && v == int64(c.touches()) {
			held++
		}
	}
	return held, sampled
}
