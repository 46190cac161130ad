package node_test

import (
	"context"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// Nodes that all start with --join listing each other (as a deployment that may restart
// any of them must) found one cluster between them: the one with the smallest name
// founds it after a short wait, the others learn their voters from it and are admitted.
func TestNodesThatAllJoinFoundOneCluster(t *testing.T) {
	all := []string{nodetest.GossipAddr("node-0"), nodetest.GossipAddr("node-1"), nodetest.GossipAddr("node-2")}
	c := nodetest.MakeNetCluster(t, 0, func(cfg *node.Config) { cfg.Join = all })
	for i := 0; i < 3; i++ {
		c.Add()
	}
	c.WaitConverged()
	res := make([]counter.Result, 1)
	for i, n := range c.Nodes {
		n.Do(context.Background(), []counter.Op{{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}, res)
		if res[0].Err != nil || res[0].Count != int64(i+1) {
			t.Fatalf("incr through %s: got %d, %v; want %d", n.Name(), res[0].Count, res[0].Err, i+1)
		}
	}
	for _, n := range c.Nodes {
		if owned, held := n.Holding(); owned == 0 || owned != held {
			t.Fatalf("%s holds %d of %d partitions", n.Name(), held, owned)
		}
	}
}
