package proctest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Options shape a Cluster.
type Options struct {
	Args            []string      // extra flags for every node, e.g. "--redis", url (not --log-format: the harness reads JSON)
	Env             []string      // extra environment (KEY=value) for every node
	ConvergeTimeout time.Duration // bound of WaitConverged; zero: ConvergeTimeout
	// OwnAddrs gives node-i the address 127.0.0.(i+2) for all its ports (it also dials
	// its peers from it), so that Firewall can cut it off from the others by address.
	OwnAddrs bool
	// Token, when set, is every node's client token (given as LEAPCOUNT_TOKEN, so it
	// is not on the command line); the harness's own HTTP requests send it.
	Token string
	// RESPCluster gives every node a --resp-cluster listener (Addrs.RESPCluster), for
	// Redis Cluster clients.
	RESPCluster bool
	// GRPC gives every node a --grpc listener (Addrs.GRPC), for Envoy's rate limit
	// service; the flags that go with it (--limits) are the test's, in Args.
	GRPC bool
	// Ratelimit runs `leapcount-node ratelimit`: envoyproxy/ratelimit's variables, in
	// Env, configure the node, and the harness's flags (after them) still win.
	Ratelimit bool
	// NoJoin gives nodes no --join: they find each other another way (--join-redis).
	NoJoin bool
}

// Cluster is a set of node processes started by StartCluster (and Add).
type Cluster struct {
	t    testing.TB
	bin  string
	opts Options
	dir  string
	http *http.Client

	mu    sync.Mutex
	nodes []*Node // every node ever added, node-i at index i
}

// StartCluster builds the binary (once per process), starts n nodes, node i joining
// node 0's gossip address, and waits until they have converged (WaitConverged). Every
// process is killed when the test ends; if the test failed, each node's log tail is
// printed.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.ConvergeTimeout <= 0 {
		opts.ConvergeTimeout = ConvergeTimeout
	}
	c := &Cluster{t: t, bin: Binary(t), opts: opts, dir: t.TempDir(),
		http: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	t.Cleanup(c.cleanup)
	for i := 0; i < n; i++ {
		c.Add()
	}
	c.WaitConverged()
	return c
}

// cleanup kills what still runs and prints the logs of a failed test.
func (c *Cluster) cleanup() {
	nodes := c.Nodes()
	for _, n := range nodes {
		n.forceKill()
	}
	c.http.CloseIdleConnections()
	if c.t.Failed() {
		for _, n := range nodes {
			c.t.Logf("%s", n.LogTail(6000))
		}
		c.keepLogs(nodes)
	}
}

// keepLogs copies the nodes' whole logs of a failed test into the directory
// LEAPCOUNT_KEEP_LOGS names, if any: the tails printed above are often not enough.
func (c *Cluster) keepLogs(nodes []*Node) {
	dir := os.Getenv("LEAPCOUNT_KEEP_LOGS")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, strings.ReplaceAll(c.t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Logf("proctest: keep logs: %v", err)
		return
	}
	for _, n := range nodes {
		b, err := os.ReadFile(n.logPath)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, n.name+".log"), b, 0o644)
		}
		if err != nil {
			c.t.Logf("proctest: keep logs: %v", err)
		}
	}
	c.t.Logf("proctest: the nodes' logs are in %s", dir)
}

// Add starts one more node, node-i for the next i, joining node 0 if it is live, else
// every live node; it waits until the process serves, not for the cluster to converge.
func (c *Cluster) Add() *Node {
	c.t.Helper()
	c.mu.Lock()
	name := fmt.Sprintf("node-%d", len(c.nodes))
	n := &Node{c: c, name: name, logPath: filepath.Join(c.dir, name+".log")}
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	var join []string
	switch first := c.Node(0); {
	case c.opts.NoJoin:
	case first != n && first.live():
		join = []string{first.Gossip()}
	default:
		join = c.joinAddrs(n)
	}
	if err := n.launch(Addrs{}, join); err != nil {
		n.forceKill()
		c.t.Fatalf("proctest: start %s: %v\n%s", name, err, n.LogTail(4096))
	}
	return n
}

// joinAddrs are the gossip addresses of the live nodes other than self.
func (c *Cluster) joinAddrs(self *Node) []string {
	var out []string
	for _, n := range c.Live() {
		if n != self {
			out = append(out, n.Gossip())
		}
	}
	return out
}

// Node is node-i.
func (c *Cluster) Node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Nodes are all nodes ever added, node-i at index i, whether they run or not.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Live are the nodes whose process runs and is not paused.
func (c *Cluster) Live() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.live() {
			out = append(out, n)
		}
	}
	return out
}

func (n *Node) live() bool { return n.Running() && !n.Paused() }

// HTTPAddrs are the HTTP addresses of the live nodes.
func (c *Cluster) HTTPAddrs() []string { return addrsOf(c.Live(), (*Node).HTTP) }

// GRPCAddrs are the gRPC addresses of the live nodes (Options.GRPC).
func (c *Cluster) GRPCAddrs() []string { return addrsOf(c.Live(), (*Node).GRPC) }

// RESPAddrs are the RESP addresses of the live nodes.
func (c *Cluster) RESPAddrs() []string { return addrsOf(c.Live(), (*Node).RESP) }

func addrsOf(nodes []*Node, f func(*Node) string) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = f(n)
	}
	return out
}

// WaitConverged polls Converged until it holds, failing the test after the
// ConvergeTimeout of the Options.
func (c *Cluster) WaitConverged() {
	c.t.Helper()
	start := time.Now()
	if err := wait.Until(c.opts.ConvergeTimeout, c.Converged); err != nil {
		c.t.Fatalf("proctest: live nodes did not converge within %v: %v", c.opts.ConvergeTimeout, err)
	}
	c.t.Logf("proctest: %d live nodes converged in %v", len(c.Live()), time.Since(start).Round(time.Millisecond))
}
