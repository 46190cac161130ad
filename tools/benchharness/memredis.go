package benchharness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	lg "github.com/leapcount/leapcount/tools/loadgen"
	"github.com/redis/go-redis/v9"
)

// loadRedis loads the case's counters into a fresh redis-server with the hash-bucket
// window and measures it: with the script itself (a call per counter, with the real
// clock) when each is touched once and the case is small enough; otherwise with the
// loader (loaderRequest), which leaves each key as the script would after one call
// in each bucket.
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
	start, cpu0 := time.Now(), r.CPU()
	if c.viaLoader {
		m.method = fmt.Sprintf("loader: HSET of %d bucket field(s) and PEXPIRE per key, pipelined", c.touches())
		err = runLoader(ctx, r.addr, c, nowMs()/c.shape.bucketMs()-int64(c.touches())+1, c.touches(), "m:")
	} else {
		m.method = "EVALSHA hashwindow.lua, one call per counter"
		req := lg.Command(lg.Str("EVALSHA"), lg.Str(s.hashWindow), lg.Str("1"), lg.Key, lg.Now,
			lg.Str(strconv.FormatInt(c.shape.windowMs, 10)), lg.Str(strconv.Itoa(c.shape.buckets)), lg.Str("1"))
		_, err = lg.Run(ctx, loadConfig(r.addr, req, c.n))
	}
	if err != nil {
		return m, fmt.Errorf("loading redis: %w", err)
	}
	m.load, m.cpu = time.Since(start), r.CPU()-cpu0
	time.Sleep(time.Second)
	m.rss, m.used = r.RSS(), usedMemory(ctx, r.client)
	m.keys, _ = r.client.DBSize(ctx).Result()
	return m, nil
}

// loaderRequest writes, for one key, what hashwindow.lua leaves after a call with n = 1
// in each of the buckets first .. first+touches-1: a hash of those bucket indexes, each
// counting 1, expiring a window later. Ten million script calls a bucket would not fit
// the harness's time; checkLoader compares the two on a key at the start of each run.
func loaderRequest(sp memShape, first int64, touches int) lg.Request {
	args := []lg.Arg{lg.Str("HSET"), lg.Key}
	for j := first; j < first+int64(touches); j++ {
		args = append(args, lg.Str(strconv.FormatInt(j, 10)), lg.Str("1"))
	}
	hset := lg.Command(args...)
	expire := lg.Command(lg.Str("PEXPIRE"), lg.Key, lg.Str(strconv.FormatInt(sp.windowMs, 10)))
	return func(buf, key []byte, now int64, seq uint64) []byte {
		return expire(hset(buf, key, now, seq), key, now, seq)
	}
}

// runLoader loads keys prefix0 .. prefix<n-1> with loaderRequest, pipelined.
func runLoader(ctx context.Context, addr string, c memCase, first int64, touches int, prefix string) error {
	cfg := loadConfig(addr, loaderRequest(c.shape, first, touches), c.n)
	cfg.Keys, cfg.Replies = lg.Range{Prefix: prefix, N: c.n}, 2
	_, err := lg.Run(ctx, cfg)
	return err
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
