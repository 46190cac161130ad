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
	master, replica := testredis.StartReplicated(t)
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.RedisURL = master.URL()
		cfg.RedisWaitReplicas = 1
		cfg.Now = nil
	})
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
