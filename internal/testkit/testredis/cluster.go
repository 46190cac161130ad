package testredis

import (
	"context"
	"fmt"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartCluster starts n redis-servers in cluster mode (masters only, no replicas),
// introduces them to each other, splits the 16384 slots evenly among them and waits
// until every node reports cluster_state:ok and knows all n nodes.
func StartCluster(tb testing.TB, n int) []*Server {
	tb.Helper()
	masters, _ := startCluster(tb, n, 0)
	return masters
}

// StartClusterReplicated starts a cluster as StartCluster does, each master with one
// replica (replicas[i] follows masters[i]), and waits until every replica acknowledges
// its master's writes.
func StartClusterReplicated(tb testing.TB, n int) (masters, replicas []*Server) {
	tb.Helper()
	return startCluster(tb, n, n)
}

func startCluster(tb testing.TB, n, r int) (masters, replicas []*Server) {
	tb.Helper()
	nodes := make([]*Server, n+r)
	buses := make([]int, n+r)
	for i := range nodes {
		bus, err := freeport.TCP()
		if err != nil {
			tb.Fatalf("testredis: cluster bus port: %v", err)
		}
		buses[i] = bus
		nodes[i] = Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000", "--repl-diskless-sync-delay", "0")
	}
	for i := 1; i < len(nodes); i++ {
		nodes[0].Do(tb, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(nodes[i].Port()), strconv.Itoa(buses[i]))
	}
	masters, replicas = nodes[:n], nodes[n:]
	for i, s := range masters {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		s.Do(tb, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
	}
	for i, s := range replicas {
		id := masters[i].Do(tb, "CLUSTER", "MYID")
		Poll(tb, StartTimeout, s.Addr()+" replicates "+masters[i].Addr(), func() error {
			c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
			defer c.Close()
			return c.Do(context.Background(), "CLUSTER", "REPLICATE", id).Err() // once the MEET reached it
		})
	}
	for _, s := range nodes {
		Poll(tb, StartTimeout, "cluster on "+s.Addr()+" ok", func() error { return clusterOK(s, len(nodes)) })
	}
	for i, s := range replicas {
		Poll(tb, StartTimeout, s.Addr()+" in sync", func() error { return acknowledges(tb, masters[i]) })
	}
	return masters, replicas
}

// ClusterURL is a redis+cluster:// URL naming every node.
func ClusterURL(nodes []*Server) string {
	u := "redis+cluster://" + nodes[0].Addr()
	for i, s := range nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s.Addr()
	}
	return u
}

func clusterOK(s *Server, n int) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	want := []string{"cluster_state:ok", "cluster_slots_assigned:16384", fmt.Sprintf("cluster_known_nodes:%d", n)}
	for _, w := range want {
		if !strings.Contains(info, w) {
			return fmt.Errorf("CLUSTER INFO lacks %s:\n%s", w, info)
		}
	}
	return nil
}
