package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
	"github.com/leapcount/leapcount/owner"
)

// With --redis-wait-replicas 1, a failover to a replica that lagged loses none of what
// the node wrote behind: its writes the replica lacked were never confirmed, and are
// sent again until they reach the new data. (Without it they are lost unseen: the
// fallback package's TestWritesConfirmedOnReplicasSurviveAFailover shows it.)
func TestRedisWaitReplicasSurvivesAFailoverToAStaleReplica(t *testing.T) {
	c, master, replica := replicatedCluster(t, 1)
	ctx := context.Background()
	rc := respClient(t, c.Nodes[0])
	incr := func(n int) {
		t.Helper()
		for range n {
			if err := rc.Do(ctx, "SW.INCR", "failover", "1m").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	const lc = "lc:{failover}:60000:10"
	incr(10)
	testredis.Poll(t, nodetest.Timeout, "the first 10 on the replica", inRedis(t, replica, lc, 10))
	replica.Do(t, "REPLICAOF", "NO", "ONE") // it lags from here
	incr(7)
	testredis.Poll(t, nodetest.Timeout, "17 on the master", inRedis(t, master, lc, 17))
	testredis.FailOverToStale(t, master, replica)
	testredis.Poll(t, nodetest.Timeout, "17 on the data after the failover", inRedis(t, master, lc, 17))
	if n, err := rc.Do(ctx, "SW.COUNT", "failover", "1m").Int64(); err != nil || n != 17 {
		t.Fatalf("SW.COUNT = %d, %v; want 17", n, err)
	}
}

// While no replica acknowledges (--redis-wait-replicas 1, the replica gone), no write is
// confirmed and Redis counts as down: counters in memory are decided as usual, a join
// and a leave hand them over node to node (ops on moving partitions may fail
// unavailable meanwhile, as with Redis down), and once the replica is back the writes
// are confirmed and the nodes are healthy again. No count is lost or counted twice.
func TestJoinAndLeaveWhileNoReplicaAcknowledges(t *testing.T) {
	c, master, replica := replicatedCluster(t, 3)
	l := startLoad(t, c.Nodes, 500)
	waitAcked(t, l, 2000)
	replica.Stop()
	waitAcked(t, l, 2000)
	c.Add()
	c.WaitConverged()
	waitAcked(t, l, 2000)
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged()
	waitAcked(t, l, 2000)
	for _, n := range c.Nodes {
		if got := scrape(n, "leapcount_redis_replicas_behind"); got != 1 {
			t.Errorf("%s: leapcount_redis_replicas_behind %v with the replica gone; want 1", n.Name(), got)
		}
	}
	replica.Restart()
	testredis.Follow(t, replica, master)
	testredis.Poll(t, nodetest.Timeout, "every node healthy again", func() error {
		for _, n := range c.Nodes {
			if s := n.RedisStatus(); s != "up" {
				return fmt.Errorf("%s: redis %s", n.Name(), s)
			}
		}
		return nil
	})
	for _, n := range c.Nodes {
		if got := scrape(n, "leapcount_redis_replicas_behind"); got != 0 {
			t.Errorf("%s: leapcount_redis_replicas_behind %v with the replica back; want 0", n.Name(), got)
		}
	}
	waitAcked(t, l, 2000)
	l.finish()
	for _, n := range c.Nodes {
		l.checkExact(t, n)
	}
}

// replicatedCluster starts n nodes on a Redis master with one replica, with
// --redis-wait-replicas 1 and the wall clock.
func replicatedCluster(t *testing.T, n int) (c *nodetest.Cluster, master, replica *testredis.Server) {
	master, replica = testredis.StartReplicated(t)
	c = nodetest.MakeCluster(t, n, func(cfg *node.Config) {
		cfg.RedisURL = master.URL()
		cfg.RedisWaitReplicas = 1
		cfg.Now = nil
	})
	return c, master, replica
}

// A node that leaves while its write-behind is in doubt (no replica acknowledges, so no
// write is confirmed) sends it again until Redis confirms it, up to its shutdown
// timeout: a failover to the replica that lacked it, while the node is leaving, loses
// none of it. A leaver that stopped at once left its receiver a fence nobody would
// reach, and the counts were lost from Redis (seen once in CI, in the chaos suite's
// TestSentinelFailoverToALaggingReplica).
func TestALeaverSendsItsWriteBehindInDoubtUntilConfirmed(t *testing.T) {
	settling := make(chan struct{})
	var once sync.Once
	master, replica := testredis.StartReplicated(t)
	c := nodetest.MakeCluster(t, 2, func(cfg *node.Config) {
		cfg.RedisURL = master.URL()
		cfg.RedisWaitReplicas = 1
		cfg.Now = nil
		cfg.ShutdownTimeout = time.Minute
		cfg.Logger = slog.New(onMessage{owner.MsgSettlingInDoubt, func() { once.Do(func() { close(settling) }) }})
	})
	ctx := context.Background()
	survivor, leaver := c.Nodes[0], c.Nodes[1]
	const key = "in-doubt"
	lc := fmt.Sprintf("lc:{%s}:60000:10", key)
	if m, _ := survivor.Router().Ring().Owner(key); m.Name != leaver.Name() {
		t.Skipf("%q is owned by %s, not the leaver; the ring's placement changed", key, m.Name)
	}
	rc := respClient(t, survivor)
	incr := func(n int) {
		t.Helper()
		for range n {
			if err := rc.Do(ctx, "SW.INCR", key, "1m").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	incr(10)
	testredis.Poll(t, nodetest.Timeout, "the first 10 on the replica", inRedis(t, replica, lc, 10))
	replica.Do(t, "REPLICAOF", "NO", "ONE") // it lags from here: no write is confirmed
	incr(7)
	testredis.Poll(t, nodetest.Timeout, "17 on the master, in doubt", inRedis(t, master, lc, 17))
	testredis.Poll(t, nodetest.Timeout, "the leaver's write-behind in doubt", func() error {
		if got := scrape(leaver, "leapcount_writebehind_in_doubt"); got != 1 {
			return fmt.Errorf("leapcount_writebehind_in_doubt %v; want 1", got)
		}
		return nil
	})

	stopped := make(chan error, 1)
	go func() { stopped <- leaver.Stop(ctx) }()
	// The failover comes once the leaver waits for Redis to confirm its write-behind, or
	// has stopped without: then nobody sends it again.
	select {
	case err := <-stopped:
		stopped <- err
	case <-settling:
	case <-time.After(nodetest.Timeout):
		t.Fatal("the leaver neither stopped nor waited for its write-behind in doubt")
	}
	testredis.FailOverToStale(t, master, replica) // the master now holds the replica's 10
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(nodetest.Timeout):
		t.Fatal("the leaver did not stop once Redis could confirm its writes")
	}
	testredis.Poll(t, nodetest.Timeout, "17 on the data after the failover", inRedis(t, master, lc, 17))
	if n, err := rc.Do(ctx, "SW.COUNT", key, "1m").Int64(); err != nil || n != 17 {
		t.Fatalf("SW.COUNT = %d, %v; want 17", n, err)
	}
	testredis.Poll(t, nodetest.Timeout, "no write-behind in doubt on the survivor", func() error {
		if got := scrape(survivor, "leapcount_writebehind_in_doubt"); got != 0 {
			return fmt.Errorf("leapcount_writebehind_in_doubt %v; want 0", got)
		}
		return nil
	})
}

// inRedis is nil once Redis s holds want in the buckets of the counter hash lc.
func inRedis(t *testing.T, s *testredis.Server, lc string, want int64) func() error {
	return func() error {
		var sum int64
		for f, v := range s.Client(t).HGetAll(context.Background(), lc).Val() {
			if b := bucketFields([]string{f}); len(b) == 1 {
				var n int64
				fmt.Sscan(v, &n)
				sum += n
			}
		}
		if sum != want {
			return fmt.Errorf("%s holds %d; want %d", s.Addr(), sum, want)
		}
		return nil
	}
}

// onMessage is a slog handler that calls fn for each record whose message is msg, and
// drops every record.
type onMessage struct {
	msg string
	fn  func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.fn()
	}
	return nil
}
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessage) WithGroup(string) slog.Handler      { return h }
