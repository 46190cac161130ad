package node_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/internal/testredis"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
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
	inRedis := func(s *testredis.Server, want int64) func() error {
		return func() error {
			var sum int64
			for f, v := range s.Client(t).HGetAll(ctx, "lc:{failover}:60000:10").Val() {
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
	incr(10)
	testredis.Poll(t, nodetest.Timeout, "the first 10 on the replica", inRedis(replica, 10))
	replica.Do(t, "REPLICAOF", "NO", "ONE") // it lags from here
	incr(7)
	testredis.Poll(t, nodetest.Timeout, "17 on the master", inRedis(master, 17))
	testredis.FailOverToStale(t, master, replica)
	testredis.Poll(t, nodetest.Timeout, "17 on the data after the failover", inRedis(master, 17))
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
