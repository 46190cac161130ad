package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
	"github.com/leapcount/leapcount/ring"
)

// A rolling upgrade keeps one placement on every node: while a member places as
// releases before matching did (--placement consistent stands in for one), every node
// builds that release's ring, epoch and all; once it is replaced, every node switches
// to matching, and no count is lost on the way.
func TestRollingUpgradeSwitchesPlacementOnceEveryMemberCan(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		if cfg.Name == "node-1" {
			cfg.Placement = node.PlacementConsistent
		}
	})
	if err := placedBy(c, ring.Consistent); err != nil {
		t.Fatalf("with an old member: %v", err)
	}
	cl := respClient(t, c.Nodes[0])
	ctx := context.Background()
	const keys = 200
	for i := range keys {
		if err := cl.Do(ctx, "SW.INCR", fmt.Sprint("upgrade-", i), "10m", "BY", i+1).Err(); err != nil {
			t.Fatalf("SW.INCR: %v", err)
		}
	}
	if err := c.Stop(1); err != nil { // the old member leaves...
		t.Fatalf("stop: %v", err)
	}
	c.Add() // ...and its replacement joins
	c.WaitConverged()
	if err := wait.True(nodetest.Timeout, func() bool { return placedBy(c, ring.Config{}) == nil }); err != nil {
		t.Fatalf("once every member can: %v", placedBy(c, ring.Config{}))
	}
	for i := range keys {
		got, err := cl.Do(ctx, "SW.COUNT", fmt.Sprint("upgrade-", i), "10m").Int64()
		if err != nil || got != int64(i+1) {
			t.Fatalf("upgrade-%d: got %d, %v; want %d", i, got, err, i+1)
		}
	}
}

// placedBy checks that every running node's ring is the one cfg builds from them.
func placedBy(c *nodetest.Cluster, cfg ring.Config) error {
	var members []ring.Member
	for _, n := range c.Running() {
		members = append(members, ring.Member{Name: n.Name(), RPCAddr: n.RPCAddr()})
	}
	want := ring.New(members, cfg)
	for _, n := range c.Running() {
		rg := n.Router().Ring()
		if rg == nil || rg.Epoch() != want.Epoch() {
			return fmt.Errorf("%s: ring %v; want %v (%d members, placement %v)", n.Name(), describe(rg), want.Epoch(), len(members), want.Config().Placement)
		}
	}
	return nil
}

func describe(rg *ring.Ring) string {
	if rg == nil {
		return "none"
	}
	return fmt.Sprintf("%v of %d, placement %v", rg.Epoch(), rg.Len(), rg.Config().Placement)
}

// --partitions sets the partitions the ring places, on every node of the cluster; a
// node started with another count is refused on gossip as a node of another cluster
// is: it fails to join, and the cluster never counts it a member.
func TestPartitionsAreTheWholeClusters(t *testing.T) {
	const fine = 4 * ring.DefaultPartitionCount
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) { cfg.Partitions = fine })
	if err := placedBy(c, ring.Config{PartitionCount: fine}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, out := respClient(t, c.Nodes[0]), respClient(t, c.Nodes[2])
	const keys = 200
	for i := range keys {
		if err := in.Do(ctx, "SW.INCR", fmt.Sprint("fine-", i), "10m", "BY", i+1).Err(); err != nil {
			t.Fatalf("SW.INCR: %v", err)
		}
	}
	for i := range keys {
		if got, err := out.Do(ctx, "SW.COUNT", fmt.Sprint("fine-", i), "10m").Int64(); err != nil || got != int64(i+1) {
			t.Fatalf("fine-%d through another node: got %d, %v; want %d", i, got, err, i+1)
		}
	}

	logs := &lockedBuffer{}
	cfg := c.Config("node-9")
	cfg.Partitions = 0 // the default, 4096
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	other, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop(context.Background())
	wait.For(t, nodetest.Timeout, func() error {
		if n := strings.Count(logs.String(), `"msg":"join failed"`); n < 2 {
			return fmt.Errorf("%d failed joins; want 2", n)
		}
		return nil
	})
	if other.Ready() {
		t.Error("the node of 4096 partitions is ready: it joined")
	}
	var view node.ClusterView // what leapcount-node status shows of it: why it is not ready
	if err := getJSON(other, "/v1/cluster", &view); err != nil {
		t.Fatal(err)
	}
	if p := view.Problems(); len(p) == 0 || !strings.Contains(p[0], "node-9 has not joined the cluster") || view.JoinFailures < 2 {
		t.Errorf("the refused node's problems: %q (%d joins failed); want first that it has not joined", p, view.JoinFailures)
	}
	c.WaitConverged() // three members (Converged: each ring has every running node, and only them)
	for _, n := range c.Running() {
		if rg := n.Router().Ring(); rg.Len() != 3 || rg.PartitionCount() != fine {
			t.Errorf("%s after a node of 4096 partitions tried to join: a ring of %d members and %d partitions; want 3 and %d",
				n.Name(), rg.Len(), rg.PartitionCount(), fine)
		}
	}
}

// --partitions takes the counts that group the hash slots evenly and place by
// matching; another is refused, naming the flag.
func TestPartitionsOutOfRangeAreRefused(t *testing.T) {
	for _, c := range []struct {
		partitions int
		placement  string
		flag       string
	}{
		{1000, "", "partitions"}, {2048, "", "partitions"}, {32768, "", "partitions"}, {-1, "", "partitions"},
		{16384, node.PlacementConsistent, "placement"},
	} {
		cfg := node.Config{Name: "n", Partitions: c.partitions, Placement: c.placement}.WithDefaults()
		var cerr *node.ConfigError
		if err := cfg.Validate(); !errors.As(err, &cerr) || cerr.Flag != c.flag {
			t.Errorf("--partitions %d --placement %q: %v; want a ConfigError naming %s", c.partitions, c.placement, err, c.flag)
		}
	}
	for _, p := range []int{0, 4096, 8192, 16384} {
		cfg := node.Config{Name: "n", Partitions: p}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			t.Errorf("--partitions %d: %v; want it taken", p, err)
		}
	}
}
