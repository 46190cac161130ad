package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// Nodes given no join list, only --join-redis, find each other through Redis and form
// one cluster, as the replicas of a Deployment behind one Service do: each binds its
// cluster ports on every interface and advertises the address it reaches Redis from.
// One that leaves is unlisted at once; one that starts later joins them.
func TestNodesFindEachOtherThroughRedis(t *testing.T) {
	srv := testredis.Start(t)
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		cfg.Join, cfg.JoinRedis, cfg.RedisURL = nil, true, srv.URL()
		cfg.ClusterName = "replicas"
		cfg.GossipAddr, cfg.RPCAddr = "0.0.0.0:0", "0.0.0.0:0"
	})
	listed := func() []string {
		got, err := srv.Client(t).ZRange(context.Background(), "lc:members:replicas", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	gossipAddrs := func() []string {
		var out []string
		for _, n := range c.Running() {
			out = append(out, n.GossipAddr())
		}
		slices.Sort(out)
		return out
	}
	if got, want := listed(), gossipAddrs(); !slices.Equal(got, want) {
		t.Fatalf("Redis lists %q; want the three nodes' gossip addresses %q", got, want)
	}
	for _, a := range gossipAddrs() {
		if host := a[:len("127.0.0.1")]; host != "127.0.0.1" {
			t.Fatalf("a node advertises %s; want the address it reaches Redis (on loopback) from", a)
		}
	}
	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(), gossipAddrs(); !slices.Equal(got, want) {
		t.Fatalf("after a graceful leave Redis lists %q; want %q", got, want)
	}
	c.Add()
	c.WaitConverged()
	if err := wait.Until(nodetest.Timeout, func() error {
		if got, want := listed(), gossipAddrs(); !slices.Equal(got, want) {
			return fmt.Errorf("Redis lists %q; want %q", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
