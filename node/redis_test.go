package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testredis"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// loadRun sends SW.INCR BY 1 over keys through the given nodes from several workers
// until stop closes, and counts per key the increments acknowledged.
type loadRun struct {
	acked  []atomic.Int64
	failed atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startLoad(t *testing.T, nodes []*node.Node, keys int) *loadRun {
	l := &loadRun{acked: make([]atomic.Int64, keys), stop: make(chan struct{})}
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
					l.failed.Add(1)
				} else {
					l.acked[k].Add(1)
				}
			}
		}(w, cl)
	}
	return l
}

func (l *loadRun) finish() { close(l.stop); l.wg.Wait() }

// checkExact reads every key through n and compares it with what was acknowledged.
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
	if lost != 0 || extra != 0 || l.failed.Load() != 0 {
		t.Fatalf("through %s: lost %d, extra %d, failed requests %d", n.Name(), lost, extra, l.failed.Load())
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
	start := total()
	if err := waitUntil(func() bool { return total() >= start+n }); err != nil {
		t.Fatalf("load stalled: %v (failed %d)", err, l.failed.Load())
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
