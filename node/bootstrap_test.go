package node_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// Nodes that all start with --join listing each other (as a deployment that may restart
// any of them must) found one cluster between them: the one with the smallest name
// founds it after a short wait, the others learn their voters from it and are admitted.
func TestNodesThatAllJoinFoundOneCluster(t *testing.T) {
	t.Parallel() // mostly waiting out bootstrap timers, on a network of its own
	all := []string{nodetest.GossipAddr("node-0"), nodetest.GossipAddr("node-1"), nodetest.GossipAddr("node-2")}
	c := nodetest.MakeNetCluster(t, 0, func(cfg *node.Config) { cfg.Join = all })
	for i := 0; i < 3; i++ {
		c.Add()
	}
	c.WaitConverged()
	incrThroughEach(t, c)
	for _, n := range c.Nodes {
		if owned, held := n.Holding(); owned == 0 || owned != held {
			t.Fatalf("%s holds %d of %d partitions", n.Name(), held, owned)
		}
	}
}

// seedNames is a DNS whose answers the test changes, as a headless Service's records
// change while a StatefulSet's pods come up. A name without records does not resolve.
type seedNames struct {
	mu  sync.Mutex
	ips []string
}

func (s *seedNames) set(ips ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips = ips
}

func (s *seedNames) lookup(_ context.Context, host string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if host != "peers.test" || len(s.ips) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(s.ips), nil
}

// A StatefulSet started in order (OrderedReady) with --join set to its headless
// Service's name: the first pod starts before its own record exists, waits for it
// without failing, and founds the cluster once the name lists only itself; each later
// pod finds the ones before it in the name. All end in one cluster, every one a voter.
func TestStatefulSetBootstrapThroughOneSeedName(t *testing.T) {
	t.Parallel() // mostly waiting out bootstrap timers, on a network of its own
	var dns seedNames
	c := nodetest.MakeNetCluster(t, 0, func(cfg *node.Config) {
		cfg.Join, cfg.LookupHost = []string{"peers.test:7946"}, dns.lookup
	})
	first := c.Add()
	// Not ready while the name does not resolve: it has not found out that it is alone.
	// (A span of time, for a non-event: several re-tries of the join.)
	if err := wait.Until(time.Second, func() error {
		if first.Ready() {
			return nil
		}
		return wait.ErrNotYet
	}); err == nil {
		t.Fatalf("the first node is ready before its seed name resolved")
	}
	hosts := []string{nodetest.Host("node-0")}
	dns.set(hosts...)
	wait.For(t, nodetest.Timeout, func() error {
		if !first.Ready() {
			return fmt.Errorf("the first node is not ready after its seed name listed it alone")
		}
		return nil
	})
	for i := 1; i < 3; i++ {
		hosts = append(hosts, nodetest.Host(fmt.Sprintf("node-%d", i)))
		dns.set(hosts...) // the pod's record appears as the pod starts
		c.Add()
		c.WaitConverged()
	}
	incrThroughEach(t, c)
}

// incrThroughEach adds 1 to one counter through each node in turn: the counts go 1, 2,
// 3... only if the nodes are one cluster, agreeing on the counter's one owner.
func incrThroughEach(t *testing.T, c *nodetest.Cluster) {
	t.Helper()
	res := make([]counter.Result, 1)
	for i, n := range c.Nodes {
		n.Do(context.Background(), []counter.Op{{Kind: counter.Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}, res)
		if res[0].Err != nil || res[0].Count != int64(i+1) {
			t.Fatalf("incr through %s: got %d, %v; want %d", n.Name(), res[0].Count, res[0].Err, i+1)
		}
	}
}

// No cluster is founded while a seed cannot be reached: that seed may be the one member
// that still holds a running cluster (its others restarted), and founding beside it
// would make two clusters, each deciding every counter. node-0 and node-1 list each
// other and are cut off from the start: neither founds; once the cut heals they found
// one cluster.
func TestNoClusterIsFoundedWhileASeedIsUnreachable(t *testing.T) {
	t.Parallel() // mostly waiting out bootstrap timers, on a network of its own
	all := []string{nodetest.GossipAddr("node-0"), nodetest.GossipAddr("node-1")}
	c := nodetest.MakeNetCluster(t, 0, func(cfg *node.Config) { cfg.Join = all })
	c.Net.Cut(nodetest.Host("node-0"), nodetest.Host("node-1"))
	a, b := c.Add(), c.Add()
	// A span of time, for a non-event: well past the 5 s a node whose seeds are only
	// itself waits before founding.
	if err := wait.Until(7*time.Second, func() error {
		if a.Ready() || b.Ready() {
			return nil
		}
		return wait.ErrNotYet
	}); err == nil {
		t.Fatalf("a cluster was founded while its seeds could not reach each other")
	}
	c.Net.HealAll()
	c.WaitConverged()
	incrThroughEach(t, c)
}
