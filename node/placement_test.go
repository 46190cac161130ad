package node_test

import (
	"context"
	"fmt"
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
