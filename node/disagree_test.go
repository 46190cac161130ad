package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// A node that lost every gossip packet announcing a join keeps its old ring; an op it
// forwards to the counter's old owner is answered "not owner", and the node then
// exchanges state with that owner, learns the new ring and routes the op to its new
// owner. Before, it learned only at the next periodic push-pull (here an hour; 30 s by
// default), and the op failed after RetryWait as "ownership is moving".
func TestStaleNodeCatchesUpFromNotOwner(t *testing.T) {
	var c *nodetest.Cluster
	var stale, added *node.Node
	for try := 1; ; try++ {
		c, stale, added = joinUnseenBy(t)
		if got := stale.Router().Ring().Len(); got == 3 {
			break
		} else if try == 3 {
			t.Fatalf("%s: ring of %d members in 3 tries; want 3 (it must have missed the join)", stale.Name(), got)
		}
		// The join reached it some other way than the gossip packets dropped (rarely):
		// the scenario did not happen, and is set up again on a new cluster.
		t.Logf("try %d: %s learned of the join all the same; again", try, stale.Name())
	}
	newRing, oldRing := c.Nodes[0].Router().Ring(), stale.Router().Ring()
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprint("k", i)
		now, _ := newRing.Owner(k)
		was, _ := oldRing.Owner(k)
		if now.Name == added.Name() && was.Name != stale.Name() {
			key = k
		}
	}
	res := make([]counter.Result, 1)
	stale.Do(context.Background(), []counter.Op{{Kind: counter.Incr, Key: key, Window: 60_000, Buckets: 10, N: 1}}, res)
	if res[0].Err != nil || res[0].Count != 1 {
		t.Fatalf("incr %q through %s: got %+v; want count 1", key, stale.Name(), res[0])
	}
	if got := stale.Router().Ring().Len(); got != 4 {
		t.Fatalf("%s: ring of %d members after the op; want 4", stale.Name(), got)
	}
}

// joinUnseenBy makes a cluster of three whose third node loses every gossip packet
// from the others, then adds a fourth, and waits until the other three have it.
func joinUnseenBy(t *testing.T) (c *nodetest.Cluster, stale, added *node.Node) {
	t.Helper()
	c = nodetest.MakeNetCluster(t, 3, func(cfg *node.Config) { cfg.GossipTimings.PushPullInterval = time.Hour })
	stale = c.Nodes[2]
	for _, from := range []string{"node-0", "node-1", "node-3"} {
		c.Net.DropPackets(nodetest.Host(from), nodetest.Host(stale.Name()))
	}
	added = c.Add()
	if err := wait.Until(nodetest.Timeout, func() error {
		for _, n := range []*node.Node{c.Nodes[0], c.Nodes[1], added} {
			if got := n.Router().Ring().Len(); got != 4 {
				return fmt.Errorf("%s: ring of %d", n.Name(), got)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return c, stale, added
}
