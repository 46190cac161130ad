package node_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// loadRun sends SW.INCR BY 1 over keys through the given nodes from several workers
// until stop closes, and counts per key the increments acknowledged, and the requests
// that failed: certainly not counted, or with their outcome unknown.
//
// Its checks are the counts' (checkExact): nothing acknowledged lost, nothing counted
// that was not sent. A failed request is allowed: under the race detector, with every
// node in one process on a loaded host, a partition's move can take longer than an op
// is held for it (≈2 s), and an op then fails unavailable, as README says. That a join
// or a leave answers every request is the soak's to check (chaos_test
// TestOrdinaryOperationsAnswerNoErrors: node processes, make test-long).
type loadRun struct {
	acked    []atomic.Int64
	failed   atomic.Int64 // certainly not counted
	unknown  atomic.Int64 // may have counted
	firstErr atomic.Value // the first failed request's error, for the report
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, nodes []*node.Node, keys int) *loadRun {
	l := &loadRun{acked: make([]atomic.Int64, keys), stop: make(chan struct{})}
	// A test that fails before it calls finish must not leave its clients hammering
	// closed nodes: they would take the cores the package's next tests need.
	t.Cleanup(l.finish)
	for w := 0; w < 6; w++ {
		cl := respClient(t, nodes[w%len(nodes)])
		l.wg.Add(1)
		go func(w int, cl *redis.Client) {
			defer l.wg.Done()
			for i := w; ; i += 7 {
				select {
				case <-l.stop:
					return
				default:
				}
				k := i % keys
				if err := cl.Do(context.Background(), "SW.INCR", fmt.Sprint("lk:", k), "10m").Err(); err != nil {
					if faultload.MayHaveCounted(err) {
						l.unknown.Add(1)
					} else {
						l.failed.Add(1)
					}
					l.firstErr.CompareAndSwap(nil, err.Error())
				} else {
					l.acked[k].Add(1)
				}
			}
		}(w, cl)
	}
	return l
}

func (l *loadRun) finish() { l.stopOnce.Do(func() { close(l.stop) }); l.wg.Wait() }

// checkExact reads every key through n and compares it with what was acknowledged:
// none lost, and no more counted than the requests whose outcome is unknown.
func (l *loadRun) checkExact(t *testing.T, n *node.Node) {
	t.Helper()
	cl := respClient(t, n)
	lost, extra := 0, 0
	for k := range l.acked {
		got, err := cl.Do(context.Background(), "SW.COUNT", fmt.Sprint("lk:", k), "10m").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if want := l.acked[k].Load(); got < want {
			lost += int(want - got)
		} else if got > want {
			extra += int(got - want)
		}
	}
	failed, unknown := l.failed.Load(), l.unknown.Load()
	if lost != 0 || int64(extra) > unknown {
		t.Fatalf("through %s: lost %d, extra %d; want none lost, at most %d extra (outcome unknown); %d failed (first error: %v)",
			n.Name(), lost, extra, unknown, failed, l.firstErr.Load())
	}
	if failed+unknown > 0 {
		t.Logf("through %s: exact; %d requests failed, %d with outcome unknown (first error: %v)", n.Name(), failed, unknown, l.firstErr.Load())
	}
}

func redisCluster(t *testing.T, n int) *nodetest.Cluster {
	rs := testredis.Start(t)
	return nodetest.MakeCluster(t, n, func(cfg *node.Config) {
		cfg.RedisURL = rs.URL()
		cfg.Now = nil // the wall clock: buckets follow real time, as in production
	})
}

// With Redis, counters keep every count while a node joins under load.
func TestRedisJoinKeepsCounts(t *testing.T) {
	c := redisCluster(t, 3)
	l := startLoad(t, c.Nodes, 500)
	waitAcked(t, l, 3000)
	c.Add()
	c.WaitConverged()
	waitAcked(t, l, 3000)
	l.finish()
	for _, n := range c.Nodes {
		l.checkExact(t, n)
	}
}

func waitAcked(t *testing.T, l *loadRun, n int64) {
	t.Helper()
	total := func() int64 {
		s := int64(0)
		for i := range l.acked {
			s += l.acked[i].Load()
		}
		return s
	}
	// The load stalls when nothing is acknowledged for nodetest.Timeout; a slow one (make
	// test's parallel packages and -race leave the nodes a fraction of a core) may take
	// longer for n.
	start, last, seen := total(), time.Now(), int64(-1)
	err := wait.True(4*nodetest.Timeout, func() bool {
		got := total()
		if got != seen {
			seen, last = got, time.Now()
		}
		return got >= start+n || time.Since(last) > nodetest.Timeout
	})
	if got := total(); err != nil || got < start+n {
		t.Fatalf("load stalled: %d of %d acknowledged, none for %v (%d failed, %d outcome unknown; first error: %v)",
			got-start, n, time.Since(last).Round(time.Second), l.failed.Load(), l.unknown.Load(), l.firstErr.Load())
	}
}

// With Redis, counters keep every count while a node leaves gracefully under load
// (load enters through the nodes that stay).
func TestRedisLeaveKeepsCounts(t *testing.T) {
	c := redisCluster(t, 4)
	l := startLoad(t, c.Nodes[:3], 500)
	waitAcked(t, l, 3000)
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged()
	waitAcked(t, l, 3000)
	l.finish()
	for _, n := range c.Nodes {
		l.checkExact(t, n)
	}
}

// Without Redis, a graceful leave hands counters over directly: no count is lost.
func TestLeaveHandsCountersOverWithoutRedis(t *testing.T) {
	c := nodetest.MakeCluster(t, 4, func(cfg *node.Config) { cfg.Now = nil })
	l := startLoad(t, c.Nodes[:3], 500)
	waitAcked(t, l, 3000)
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	c.Add()
	c.WaitConverged()
	waitAcked(t, l, 3000)
	l.finish()
	for _, n := range c.Nodes {
		l.checkExact(t, n)
	}
}

// With Redis down, counters in memory are decided as before, /readyz stays 200,
// /v1/cluster says "degraded"; when Redis is back, write-behind catches up.
func TestRedisDownIsDegradedNotDown(t *testing.T) {
	rs := testredis.Start(t)
	c := nodetest.MakeCluster(t, 2, func(cfg *node.Config) { cfg.RedisURL = rs.URL(); cfg.Now = nil })
	n := c.Nodes[0]
	cl := respClient(t, n)
	ctx := context.Background()
	incr := func(want int64) {
		t.Helper()
		for i := 0; i < 20; i++ {
			got, err := cl.Do(ctx, "SW.INCR", fmt.Sprint("d:", i), "10m").Int64()
			if err != nil || got != want {
				t.Fatalf("incr d:%d: got %d, %v; want %d", i, got, err, want)
			}
		}
	}
	incr(1)    // the counters are now in memory on their owners
	rs.Pause() // down, but keeping its data: a write it took before freezing stays
	var view struct{ Status, Redis string }
	if err := wait.True(nodetest.Timeout, func() bool { return getJSON(n, "/v1/cluster", &view) == nil && view.Status == "degraded" }); err != nil {
		t.Fatalf("/v1/cluster never said degraded: %+v", view)
	}
	if view.Redis != "down" {
		t.Fatalf("redis: got %q; want down", view.Redis)
	}
	start := time.Now()
	incr(2)
	if d := time.Since(start); d > 2*time.Second { // a bound on waiting, not a speed test
		t.Fatalf("20 incrs took %v with Redis down; the in-memory path must not wait on Redis", d)
	}
	if resp, err := http.Get("http://" + n.HTTPAddr() + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz with Redis down: %v %v; want 200", resp, err)
	}
	rs.Resume()
	st, err := fallback.Open(ctx, fallback.Config{URL: rs.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Write-behind resumes: Redis gets both increments of every counter, each once
	// (a write sent while it was frozen is applied when it wakes, and again only in
	// name: sent again with its sequence number, it is known as applied).
	sp := leaparray.Spec{WindowMs: 600_000, Buckets: 10}
	err = wait.True(nodetest.Timeout, func() bool {
		for i := 0; i < 20; i++ {
			bs, err := fallbacktest.Load(ctx, st, fmt.Sprint("d:", i), sp, time.Now().UnixMilli())
			if err != nil || sumOf(bs) != 2 {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal("write-behind did not catch up after Redis came back")
	}
	if err := wait.True(nodetest.Timeout, func() bool { return getJSON(n, "/v1/cluster", &view) == nil && view.Status == "ok" }); err != nil {
		t.Fatalf("/v1/cluster still %+v after Redis came back", view)
	}
}

func sumOf(bs []leaparray.Bucket) uint64 {
	s := uint64(0)
	for _, b := range bs {
		s += b.Count
	}
	return s
}
