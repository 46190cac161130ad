package chaos_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/redis/go-redis/v9"
)

// Redis fails over to a replica that lagged (README, Faults): with
// --redis-wait-replicas 1, what the replica lacked was never confirmed and is sent
// again, so once every counter has been read back from Redis (a rolling restart moves
// every partition through it) nothing acknowledged is missing. Load runs throughout;
// the failover leaves at the master's address the replica's data, which lacks the
// writes of the seconds it did not follow.
func TestRedisFailoverToALaggingReplica(t *testing.T) {
	s := seed(t)
	master, replica := testredis.StartReplicated(t)
	c, g := startReplicaLoad(t, s, master.URL())
	traffic := func(d time.Duration) { time.Sleep(d) } // a span of load, not a wait for a condition
	traffic(2 * time.Second)
	replica.Do(t, "REPLICAOF", "NO", "ONE") // it lags from here
	traffic(3 * time.Second)
	testredis.FailOverToStale(t, master, replica)
	traffic(2 * time.Second)
	restartAllThenCheck(t, c, g)
}

// The same in a Redis Cluster: one master's replication stream to its replica is cut
// (the replica still sees its master alive on the cluster bus), the replica takes its
// slots over (CLUSTER FAILOVER TAKEOVER) without what it missed, and the old master
// becomes its replica, its data replaced. Nodes are told MOVED, reload the slot map and
// send what the new master lacks again.
func TestRedisClusterFailoverToALaggingReplica(t *testing.T) {
	s := seed(t)
	masters, replicas := testredis.StartClusterReplicated(t, 3)
	c, g := startReplicaLoad(t, s, testredis.ClusterURL(masters))
	fw := proctest.NewFirewall(t)
	traffic := func(d time.Duration) { time.Sleep(d) } // a span of load, not a wait for a condition
	traffic(2 * time.Second)
	old, next := masters[1], replicas[1]
	fw.DropTCP(old.Port(), replicationPort(t, old))
	traffic(3 * time.Second)
	next.Do(t, "CLUSTER", "FAILOVER", "TAKEOVER")
	if err := testredis.PollErr(60*time.Second, func() error {
		if role, err := roleOf(old); err != nil || role != "slave" {
			return fmt.Errorf("%s is a %q (%v)", old.Addr(), role, err)
		}
		return nil
	}); err != nil {
		// Seen once in CI (2026-11-29) after 30 s: what each side believed, for whoever
		// meets it next.
		t.Fatalf("the old master following the new one: still not true after 60s: %v\nold's CLUSTER NODES:\n%v\nnew's CLUSTER NODES:\n%v",
			err, old.Do(t, "CLUSTER", "NODES"), next.Do(t, "CLUSTER", "NODES"))
	}
	fw.Heal()
	traffic(2 * time.Second)
	restartAllThenCheck(t, c, g)
}

// replicationPort is the port a replica of m replicates from (its end of the link).
func replicationPort(t *testing.T, m *testredis.Server) int {
	t.Helper()
	list, _ := m.Do(t, "CLIENT", "LIST", "TYPE", "replica").(string)
	for _, f := range strings.Fields(list) {
		if addr, ok := strings.CutPrefix(f, "addr="); ok {
			_, port, _ := net.SplitHostPort(addr)
			if p, err := strconv.Atoi(port); err == nil {
				return p
			}
		}
	}
	t.Fatalf("%s has no replica: %q", m.Addr(), list)
	return 0
}

// roleOf is what ROLE says s is: master or slave.
func roleOf(s *testredis.Server) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(r) == 0 {
		return "", fmt.Errorf("ROLE on %s: %v %v", s.Addr(), r, err)
	}
	role, _ := r[0].(string)
	return role, nil
}

// restartAllThenCheck restarts every node in turn (each leaves gracefully first, so its
// partitions go through Redis to the others, which load them from it), then stops the
// load and checks every count through every node.
func restartAllThenCheck(t *testing.T, c *proctest.Cluster, g *faultload.Gen) {
	t.Helper()
	// Each node must find its writes confirmed again before the first leaves: a node
	// leaving while Redis does not confirm its writes in doubt loses them at
	// --shutdown-timeout (README's graceful leave row), which is not this fault's case.
	testredis.Poll(t, 60*time.Second, "every node finds Redis up", func() error {
		for _, n := range c.Live() {
			if v, err := n.View(); err != nil || v.Redis != "up" {
				return fmt.Errorf("%s: redis %q (%v)", n.Name(), v.Redis, err)
			}
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		n := c.Node(i)
		leave(t, c, g, n)
		n.Restart()
		c.WaitConverged()
		g.SetAddrs(c.RESPAddrs()...)
		time.Sleep(time.Second) // traffic through it again: a span, not a wait
	}
	st := g.Stop()
	c.WaitConverged()
	r, _, disagree := checkEvery(t, c, g.Snapshot(), nil, g.Window())
	if !r.OK() {
		t.Errorf("after the failover and a rolling restart: %v", r)
	}
	if disagree > 0 {
		t.Errorf("nodes disagree on %d keys", disagree)
	}
	t.Logf("incr: %d acked, %d failed, %d unknown; errors: %q", st.Acked, st.Failed, st.Unknown, g.Errors())
}

// The same through a real Sentinel: the master's replication stream is dropped, the
// master is killed, Sentinel promotes the replica (which lacks what it did not
// receive), and go-redis's Sentinel client follows it; the old master comes back as
// its replica, and the nodes send what the new master lacks again.
func TestSentinelFailoverToALaggingReplica(t *testing.T) {
	s := seed(t)
	master, replica := testredis.StartReplicated(t)
	sentinel := testredis.StartQuickSentinel(t, master, "lc")
	testredis.Poll(t, 20*time.Second, "sentinel sees the replica", func() error {
		if r, _ := sentinel.Do(t, "SENTINEL", "REPLICAS", "lc").([]any); len(r) == 0 {
			return fmt.Errorf("no replica yet")
		}
		return nil
	})
	c, g := startReplicaLoad(t, s, testredis.SentinelURL(sentinel, "lc"))
	fw := proctest.NewFirewall(t)
	traffic := func(d time.Duration) { time.Sleep(d) } // a span of load, not a wait for a condition
	traffic(2 * time.Second)
	fw.DropTCP(master.Port(), replicationPort(t, master))
	traffic(3 * time.Second)
	master.Stop()
	testredis.Poll(t, 60*time.Second, "the replica promoted", func() error {
		// A failover kills the promoted replica's client connections: an EOF here is
		// part of the failover, not a failure.
		if role, err := roleOf(replica); err != nil || role != "master" {
			return fmt.Errorf("%s is a %q (%v)", replica.Addr(), role, err)
		}
		return nil
	})
	// Sentinel names the promoted replica before the old master comes back: until it
	// does, it hands out the old master's address, and a master restarted there would be
	// one Sentinel may yet take back by failing over again (seen once in CI, 2026-12-03:
	// writes unconfirmed for ten seconds more).
	testredis.Poll(t, 30*time.Second, "Sentinel names the promoted replica", func() error {
		addr, _ := sentinel.Do(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "lc").([]any)
		if len(addr) != 2 || fmt.Sprint(addr[1]) != strconv.Itoa(replica.Port()) {
			return fmt.Errorf("Sentinel's master is %v, want port %d", addr, replica.Port())
		}
		return nil
	})
	fw.Heal()
	// The old master comes back empty as the new master's replica (as Sentinel would
	// make it, in its own time), and writes are acknowledged again.
	master.Restart()
	testredis.Follow(t, master, replica)
	traffic(3 * time.Second)
	restartAllThenCheck(t, c, g)
}

// startReplicaLoad starts three nodes on redisURL with --redis-wait-replicas 1, and load
// through all of them (seeded by s).
func startReplicaLoad(t *testing.T, s uint64, redisURL string) (*proctest.Cluster, *faultload.Gen) {
	t.Helper()
	c := proctest.StartCluster(t, 3, proctest.Options{Args: append(append([]string(nil), fastDetection...),
		"--redis", redisURL, "--redis-wait-replicas", "1")})
	g := faultload.New(faultload.Config{Keys: 500, Workers: 4, Seed: s, Rate: 1000, Timeout: 2 * time.Second}, c.RESPAddrs()...)
	t.Cleanup(g.Close)
	g.Start(5*time.Minute, 1<<40)
	return c, g
}
