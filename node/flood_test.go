package node_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/internal/testkit/longtest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
	"github.com/leapcount/leapcount/owner"
)

// A flood of new keys into a node whose Redis is slow (busy with scripts of 30 ms each):
// what write-behind holds outside the store stays within one batch
// (owner.DefaultFlushBatch counters) however many counters wait, and once the backlog is
// written Redis holds every acknowledged increment, each once (docs/redis.md,
// Write-behind).
func TestKeyFloodWithRedisHoldsItsMemory(t *testing.T) {
	longtest.Skip(t)
	const keys, pipe = 60_000, 500
	rs := testredis.Start(t)
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.RedisURL = rs.URL()
		cfg.Now = nil // Redis's buckets follow real time
	})
	n := c.Nodes[0]
	var held, waiting atomic.Int64 // the most write-behind held outside the store; in it
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			held.Store(max(held.Load(), int64(n.Unwritten())))
			waiting.Store(max(waiting.Load(), int64(n.Store().PendingCounters())))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	cl := respClient(t, n)
	ctx := context.Background()
	acked, failed := 0, 0
	flood := func(from, to int) {
		for ; from < to; from += pipe {
			cmds := make([]*redis.Cmd, 0, pipe)
			p := cl.Pipeline()
			for i := from; i < min(from+pipe, to); i++ {
				cmds = append(cmds, p.Do(ctx, "SW.INCR", fmt.Sprint("flood:", i), "10m"))
			}
			p.Exec(ctx)
			for _, cmd := range cmds {
				if cmd.Err() != nil {
					failed++
				} else {
					acked++
				}
			}
		}
	}
	busy := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer busy.Close()
	slowed := make(chan struct{})
	stopBusy := make(chan struct{})
	go func() {
		defer close(slowed)
		for {
			select {
			case <-stopBusy:
				return
			default:
			}
			busy.Eval(ctx, busyScript, nil)
		}
	}()
	flood(0, keys)
	close(stopBusy)
	<-slowed
	if err := wait.True(4*nodetest.Timeout, func() bool { return n.Unwritten()+n.Store().PendingCounters() == 0 }); err != nil {
		t.Fatalf("the backlog was not written: %d in batches, %d waiting in the store", n.Unwritten(), n.Store().PendingCounters())
	}
	close(stop)
	<-sampled
	t.Logf("%d acked, %d failed; at most %d counters in batches, %d waiting in the store", acked, failed, held.Load(), waiting.Load())
	if failed != 0 {
		t.Fatalf("%d of %d increments failed", failed, keys)
	}
	if waiting.Load() <= owner.DefaultFlushBatch {
		t.Fatalf("at most %d counters waited in the store: the flood never outran a batch, and tested nothing", waiting.Load())
	}
	if held.Load() > owner.DefaultFlushBatch {
		t.Fatalf("write-behind held %d counters outside the store; the bound is %d", held.Load(), owner.DefaultFlushBatch)
	}
	st, err := fallback.Open(ctx, fallback.Config{URL: rs.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sp, now := leaparray.Spec{WindowMs: 600_000, Buckets: 10}, time.Now().UnixMilli()
	for i := range keys {
		bs, err := fallbacktest.Load(ctx, st, fmt.Sprint("flood:", i), sp, now)
		if err != nil || sumOf(bs) != 1 {
			t.Fatalf("flood:%d in Redis: %v, %v; want 1 (acknowledged once)", i, bs, err)
		}
	}
}

// busyScript keeps Redis busy for 30 ms.
const busyScript = `local s = redis.call('TIME')
local t0 = s[1] * 1000000 + s[2]
repeat
  local n = redis.call('TIME')
until n[1] * 1000000 + n[2] - t0 > 30000
return 1`
