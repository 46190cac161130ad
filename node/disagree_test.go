package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// A node that lost every gossip packet announcing a join keeps its old ring; an op it
// forwards to the counter's old owner is answered "not owner", and the node then
// exchanges state with that owner, learns the new ring and routes the op to its new
// owner. Before, it learned only at the next periodic push-pull (here an hour; 30 s by
// default), and the op failed after RetryWait as "ownership is moving".
func TestStaleNodeCatchesUpFromNotOwner(t *testing.T) {
	c := nodetest.MakeNetCluster(t, 3, func(cfg *node.Config) { cfg.GossipTimings.PushPullInterval = time.Hour })
	stale := c.Nodes[2]
	for _, from := range []string{"node-0", "node-1", "node-3"} {
		c.Net.DropPackets(nodetest.Host(from), nodetest.Host(stale.Name()))
	}
	added := c.Add()
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
	if got := stale.Router().Ring().Len(); got != 3 {
		t.Fatalf("%s: ring of %d members; want 3 (it must have missed the join)", stale.Name(), got)
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
