package benchharness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	lg "github.com/leapcount/leapcount/internal/loadgen"
	"github.com/redis/go-redis/v9"
)

// loadRedis loads the case's counters into a fresh redis-server with the hash-bucket
// window and measures it: with the script itself (a call per counter, with the real
// clock) when each is touched once and the case is small enough; otherwise with
// hashload.lua, which leaves each key as the script would after one call per bucket.
func (h *harness) loadRedis(ctx context.Context, c memCase) (redisMemory, error) {
	var m redisMemory
	r, err := h.startRedis("redis-mem", "")
	if err != nil {
		return m, err
	}
	defer h.procs.stopSome(r.proc)
	defer r.client.Close()
	s, err := loadScripts(ctx, r.client)
	if err != nil {
		return m, err
	}
	time.Sleep(500 * time.Millisecond)
	m.baseRSS, m.baseUsed = r.RSS(), usedMemory(ctx, r.client)
	start := time.Now()
	if c.viaLoader {
		m.method = fmt.Sprintf("hashload.lua, 1000 keys a call, %d bucket(s) each", c.touches())
		err = runLoader(ctx, r.client, s.hashLoad, c)
	} else {
		m.method = "EVALSHA hashwindow.lua, one call per counter"
		req := lg.Command(lg.Str("EVALSHA"), lg.Str(s.hashWindow), lg.Str("1"), lg.Key, lg.Now,
			lg.Str(strconv.FormatInt(c.shape.windowMs, 10)), lg.Str(strconv.Itoa(c.shape.buckets)), lg.Str("1"))
		_, err = lg.Run(ctx, loadConfig(r.addr, req, c.n))
	}
	if err != nil {
		return m, fmt.Errorf("loading redis: %w", err)
	}
	m.load = time.Since(start)
	time.Sleep(time.Second)
	m.rss, m.used = r.RSS(), usedMemory(ctx, r.client)
	m.keys, _ = r.client.DBSize(ctx).Result()
	return m, nil
}

// runLoader calls hashload.lua on every key m:0 .. m:n-1, 1000 keys a call, from four
// connections each keeping eight calls in flight.
func runLoader(ctx context.Context, c *redis.Client, sha string, mc memCase) error {
	const batch, workers, depth = 1000, 4, 8
	first := nowMs()/mc.shape.bucketMs() - int64(mc.touches()) + 1
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = loadSome(ctx, c, sha, mc, first, w*batch, workers*batch, depth, batch)
		}()
	}
	wg.Wait()
	return firstErr(errs...)
}

// loadSome loads the batches starting at from, from+stride, ...
func loadSome(ctx context.Context, c *redis.Client, sha string, mc memCase, first int64, from, stride, depth, batch int) error {
	keys := make([]string, 0, batch)
	for at := from; at < mc.n; {
		p := c.Pipeline()
		for d := 0; d < depth && at < mc.n; d++ {
			keys = keys[:0]
			for i := at; i < min(at+batch, mc.n); i++ {
				keys = append(keys, "m:"+strconv.Itoa(i))
			}
			p.EvalSha(ctx, sha, append([]string(nil), keys...), first, mc.touches(), mc.shape.windowMs)
			at += stride
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// usedMemory is INFO memory's used_memory: the bytes Redis's allocator gave out.
func usedMemory(ctx context.Context, c *redis.Client) int64 {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
}

func nowMs() int64 { return time.Now().UnixMilli() }
