package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// BenchmarkHandoff1M measures a graceful stop of a node holding 1M counters (60s/10
// buckets): the time until they are handed to the others, through Redis (the counters
// were written behind before; the stop writes what is pending and tells the new owners)
// and directly (no Redis: the counters travel in Handoff messages). Run it with
// -benchtime 1x; it reports seconds for the stop and, with Redis, the first-touch load
// latency on the new owners.
func BenchmarkHandoff1M(b *testing.B) {
	for _, mode := range []string{"redis", "direct"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchHandoff(b, mode == "redis", 1_000_000)
			}
		})
	}
}

func benchHandoff(b *testing.B, withRedis bool, n int) {
	b.StopTimer()
	var url string
	if withRedis {
		url = testredis.Start(b).URL()
	}
	c := nodetest.MakeCluster(b, 2, func(cfg *node.Config) {
		cfg.RedisURL, cfg.Now = url, nil
		cfg.ShutdownTimeout = time.Minute
	})
	leaving := c.Nodes[1]
	rg := leaving.Router().Ring()
	sp := leaparray.Spec{WindowMs: 60_000, Buckets: 10}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("h:", i)
		if m, _ := rg.Owner(k); m.Name == leaving.Name() {
			keys = append(keys, k)
		}
	}
	now := time.Now().UnixMilli()
	for _, k := range keys {
		if _, err := leaving.Store().TryIncr(k, sp, 1, now); err != nil {
			b.Fatal(err)
		}
	}
	if withRedis { // let write-behind catch up, as it would in steady state
		st, err := fallback.Open(context.Background(), fallback.Config{URL: url})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		err = wait.True(nodetest.Timeout, func() bool {
			for i := 0; i < len(keys); i += len(keys) / 100 {
				bs, err := fallbacktest.Load(context.Background(), st, keys[i], sp, time.Now().UnixMilli())
				if err != nil || sumOf(bs) != 1 {
					return false
				}
			}
			return true
		})
		if err != nil {
			b.Fatal("write-behind did not catch up")
		}
	}
	b.StartTimer()
	start := time.Now()
	if err := c.Stop(1); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "stop-s")
	b.StopTimer()
	// The new owner answers from what was handed over: sample some counters.
	sample := keys[:1000]
	ctx := context.Background()
	client := respClient(b, c.Nodes[0])
	t0 := time.Now()
	for _, k := range sample {
		got, err := client.Do(ctx, "SW.COUNT", k, "60s").Int64()
		if err != nil || got != 1 {
			b.Fatalf("%s after the handoff: got %d, %v; want 1", k, got, err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(len(sample)), "first-count-us")
}
