package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/ring"
)

// BenchmarkFallbackLatency measures requests through node-0 for keys node-1 owns, while
// node-1 is frozen (SIGSTOP): they are decided on Redis. It reports the latency
// percentiles seen by clients (8 at once) over b.N requests; compare with the same
// requests while node-1 runs (healthy-*). Run with -benchtime Nx.
func BenchmarkFallbackLatency(b *testing.B) {
	rs := testredis.Start(b)
	c := proctest.StartCluster(b, 2, proctest.Options{Args: []string{"--redis", rs.URL()}})
	owner := c.Node(1)
	rg := ring.New([]ring.Member{{Name: "node-0"}, {Name: "node-1"}}, ring.Config{})
	var keys []string
	for i := 0; len(keys) < 1000; i++ {
		if m, _ := rg.Owner(fmt.Sprint("fb:", i)); m.Name == "node-1" {
			keys = append(keys, fmt.Sprint("fb:", i))
		}
	}
	cl := redis.NewClient(&redis.Options{Addr: c.Node(0).RESP(), Protocol: 2, MaxRetries: -1, PoolSize: 8, ReadTimeout: 10 * time.Second})
	defer cl.Close()
	healthy := measure(b, cl, keys, b.N)
	owner.Pause()
	defer owner.Resume()
	b.ResetTimer()
	frozen := measure(b, cl, keys, b.N)
	b.StopTimer()
	for _, r := range []struct {
		prefix string
		lat    []time.Duration
	}{{"healthy-", healthy}, {"frozen-", frozen}} {
		b.ReportMetric(pct(r.lat, 50), r.prefix+"p50-ms")
		b.ReportMetric(pct(r.lat, 99), r.prefix+"p99-ms")
		b.ReportMetric(pct(r.lat, 100), r.prefix+"max-ms")
	}
}

func measure(b *testing.B, cl *redis.Client, keys []string, n int) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	per := max(n/8, 1)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				start := time.Now()
				if err := cl.Do(context.Background(), "SW.INCR", keys[(w*per+i)%len(keys)], "10m").Err(); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	slices.Sort(lat)
	return lat
}

func pct(lat []time.Duration, p int) float64 {
	if len(lat) == 0 {
		return 0
	}
	i := min(len(lat)*p/100, len(lat)-1)
	return float64(lat[i].Microseconds()) / 1000
}
