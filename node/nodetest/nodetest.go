// Package nodetest starts whole leapcount nodes in one process for tests, in the
// manner of hashicorp/raft's MakeCluster: N nodes on 127.0.0.1 with port 0 everywhere,
// fast gossip, and one clock the test can move. It is ordinary code so that every
// cluster test (and later fault tests) reuses it.
package nodetest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/internal/testkit/clocktest"
	"github.com/leapcount/leapcount/internal/testkit/netsim"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/rpc"
)

// Timeout is a generous deadline for membership to converge on a loaded machine.
const Timeout = 15 * time.Second

// NewClock starts a manual clock at an hour boundary (so at a bucket boundary for any
// spec), shared by a cluster's nodes.
func NewClock() *clocktest.Clock { return clocktest.New(1_699_999_200_000) }

// Cluster is a set of nodes started by MakeCluster.
type Cluster struct {
	t     testing.TB
	Clock *clocktest.Clock
	Nodes []*node.Node
	next  int
	// Tune, when set, changes each node's Config before it starts.
	Tune func(*node.Config)
	// Net, when set, carries the nodes' traffic (gossip, rpc, and their HTTP and RESP
	// listeners) instead of loopback sockets: node-i is host 10.0.0.(i+1) on it, and
	// tests cut, hold and delay links between hosts (Host). Redis stays on loopback.
	Net *netsim.Network
}

// MakeCluster starts n nodes, each joining the first, and waits until they agree on
// the ring and are all ready. Nodes stop when the test ends.
func MakeCluster(t testing.TB, n int, tune func(*node.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Clock: NewClock(), Tune: tune}
	for i := 0; i < n; i++ {
		c.Add()
	}
	c.WaitConverged()
	return c
}

// MakeNetCluster is MakeCluster on an in-process network (Cluster.Net).
func MakeNetCluster(t testing.TB, n int, tune func(*node.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Clock: NewClock(), Tune: tune, Net: netsim.New()}
	for i := 0; i < n; i++ {
		c.Add()
	}
	c.WaitConverged()
	return c
}

// Host is the network host of the node named name ("node-3": 10.0.0.4).
func Host(name string) string {
	var i int
	fmt.Sscanf(name, "node-%d", &i)
	return fmt.Sprintf("10.0.0.%d", i+1)
}

// GossipAddr is the gossip address of the node named name on Net: every node gossips
// on port 7946 of its own host, so tests can list them before they start.
func GossipAddr(name string) string { return Host(name) + ":7946" }

// onNet makes cfg use c.Net as host Host(cfg.Name).
func (c *Cluster) onNet(cfg *node.Config) error {
	host := Host(cfg.Name)
	cfg.HTTPAddr, cfg.RESPAddr, cfg.RPCAddr = host+":0", host+":0", host+":0"
	cfg.GossipAddr = GossipAddr(cfg.Name)
	tr, err := c.Net.Transport(cfg.GossipAddr)
	if err != nil {
		return err
	}
	cfg.GossipTransport = tr
	cfg.Listen = func(_, addr string) (net.Listener, error) { return c.Net.Listen(addr) }
	cfg.RPC.Dial = c.Net.Dialer(host)
	return nil
}

// Config is the Config the harness starts node name with.
func (c *Cluster) Config(name string) node.Config {
	cfg := node.Config{
		Name: name, HTTPAddr: "127.0.0.1:0", RESPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RPCAddr: "127.0.0.1:0",
		GossipTimings: cluster.FastTimings(), RejoinInterval: 200 * time.Millisecond,
		RPC:             rpc.Config{Timeout: 2 * time.Second, DownFor: 50 * time.Millisecond},
		ShutdownTimeout: node.DefaultShutdownTimeout, Lease: lease.Config{Duration: time.Second},
		Logger: Logger(), Now: c.Clock.Now,
	}
	for _, m := range c.Running() {
		cfg.Join = append(cfg.Join, m.GossipAddr())
		break
	}
	if c.Tune != nil {
		c.Tune(&cfg)
	}
	return cfg
}

// Add starts one more node that joins the cluster (without waiting for convergence).
func (c *Cluster) Add() *node.Node {
	c.t.Helper()
	name := fmt.Sprintf("node-%d", c.next)
	c.next++
	cfg := c.Config(name)
	if c.Net != nil {
		if err := c.onNet(&cfg); err != nil {
			c.t.Fatalf("start %s: %v", name, err)
		}
	}
	n, err := node.Start(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.t.Cleanup(func() { n.Stop(context.Background()) })
	c.Nodes = append(c.Nodes, n)
	return n
}

// Stop stops node i gracefully and removes it from Running.
func (c *Cluster) Stop(i int) error {
	n := c.Nodes[i]
	c.Nodes = append(c.Nodes[:i:i], c.Nodes[i+1:]...)
	return n.Stop(context.Background())
}

// Running is the nodes started and not stopped.
func (c *Cluster) Running() []*node.Node { return c.Nodes }

// Converged returns nil once every running node is ready and all have the same ring
// epoch with every running node in it, hold every partition it gives them, and have no
// counters on their way between nodes (a count read before they arrive misses them).
func (c *Cluster) Converged() error {
	nodes := c.Running()
	if len(nodes) == 0 {
		return nil
	}
	var epoch uint64
	for i, n := range nodes {
		if !n.Ready() {
			return fmt.Errorf("%s is not ready", n.Name())
		}
		rg := n.Router().Ring()
		if rg.Len() != len(nodes) {
			return fmt.Errorf("%s: ring of %d members; want %d", n.Name(), rg.Len(), len(nodes))
		}
		if owned, held := n.Holding(); owned != held {
			return fmt.Errorf("%s holds %d of its %d partitions", n.Name(), held, owned)
		}
		if h := n.HandingOn(); h > 0 {
			return fmt.Errorf("%s has counters of %d partitions on their way", n.Name(), h)
		}
		if i == 0 {
			epoch = rg.Epoch()
		} else if rg.Epoch() != epoch {
			return fmt.Errorf("%s: epoch %x; %s has %x", n.Name(), rg.Epoch(), nodes[0].Name(), epoch)
		}
	}
	return nil
}

// Settled returns a check, to poll, that holds once the cluster has converged and every
// node has written its deltas to Redis and then read the late-write marks twice, so
// that a count taken afterwards sees every write, late ones included (owner/late.go).
func (c *Cluster) Settled() func() error {
	var polls []uint64 // each node's LatePolls once all had written everything
	return func() error {
		nodes := c.Running()
		if err := c.Converged(); err != nil {
			polls = nil
			return err
		}
		for _, n := range nodes {
			if u := n.Unwritten(); u > 0 {
				polls = nil
				return fmt.Errorf("%s has %d counters to write to Redis", n.Name(), u)
			}
		}
		if len(polls) != len(nodes) {
			polls = make([]uint64, len(nodes))
			for i, n := range nodes {
				polls[i] = n.LatePolls()
			}
			return fmt.Errorf("waiting for every node to read the late-write marks")
		}
		for i, n := range nodes {
			if n.LatePolls() < polls[i]+2 {
				return fmt.Errorf("%s has not read the late-write marks since", n.Name())
			}
		}
		return nil
	}
}

// WaitConverged polls Converged until it holds, failing the test after Timeout.
func (c *Cluster) WaitConverged() {
	c.t.Helper()
	if err := wait.Until(Timeout, c.Converged); err != nil {
		c.t.Fatalf("cluster did not converge within %v: %v", Timeout, err)
	}
}

// Logger discards logs unless LEAPCOUNT_TEST_LOG is set (memberlist goroutines may log
// after a test ends, so logs cannot go to t.Log).
func Logger() *slog.Logger {
	if os.Getenv("LEAPCOUNT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
