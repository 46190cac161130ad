package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// A node stopped before it ever joined (so before it had a ring) stops cleanly. Before,
// its drain read the ring it did not have and panicked (TestRandomizedFaults stopped a
// node it had just added, on a loaded machine).
func TestStopBeforeJoining(t *testing.T) {
	c := nodetest.MakeNetCluster(t, 0, func(cfg *node.Config) { cfg.Join = []string{"10.0.0.99:7946"} }) // nobody there
	n := c.Add()
	if n.Router().Ring() != nil {
		t.Fatalf("%s has a ring; want none before it joins", n.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// A lone node (go run ./cmd/node) stops at once on SIGTERM: it has no peer to hand its
// counters to or to wait for. Before, it waited its whole shutdown timeout for peers
// to stop forwarding to it, peers it never had.
func TestLoneNodeStopsAtOnce(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	n := c.Nodes[0]
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(node.DefaultShutdownTimeout / 2):
		t.Fatalf("a lone node still stopping after %v (its shutdown timeout is %v)", node.DefaultShutdownTimeout/2, node.DefaultShutdownTimeout)
	}
}
