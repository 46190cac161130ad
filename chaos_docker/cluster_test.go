//go:build chaos

package chaosdocker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// clusterName is the suite's LEAPCOUNT_CLUSTER_NAME; every node must report it.
const clusterName = "leapcount-chaos"

// convergeTimeout bounds how long the nodes may take to agree on their membership
// (after a start, a join, a restart, a healed cut), each node's view checked as
// proctest.CheckViews does.
const convergeTimeout = 60 * time.Second

// cluster is one compose cluster of the suite: Redis and node1-node3 (node4 while a
// scenario has it join), published on 127.0.0.1 with the port prefix.
type cluster struct {
	t       *testing.T
	dc      *compose
	prefix  string            // LEAPCOUNT_PORT_PREFIX
	ids     map[string]string // service → container id
	members []string          // the node services that should be in the cluster now
	http    *http.Client
}

// startCluster brings a fresh cluster up (with a random gossip key and the suite's
// cluster name) and waits until its three nodes agree; the cluster is torn down when
// the test ends, after printing the nodes' log tails if it failed.
func startCluster(t *testing.T, overrides ...string) *cluster {
	return startClusterWith(t, nil, overrides...)
}

// startClusterWith is startCluster with more variables for Compose (KEY=value).
func startClusterWith(t *testing.T, env []string, overrides ...string) *cluster {
	prefix := os.Getenv("LEAPCOUNT_CHAOS_PORT_PREFIX")
	if prefix == "" {
		prefix = "1"
	}
	key := make([]byte, 32)
	rand.Read(key)
	c := &cluster{t: t, prefix: prefix, ids: map[string]string{}, members: []string{"node1", "node2", "node3"},
		http: &http.Client{Timeout: 5 * time.Second},
		dc: newCompose(overrides, append([]string{"LEAPCOUNT_PORT_PREFIX=" + prefix, "LEAPCOUNT_CLUSTER_NAME=" + clusterName,
			"LEAPCOUNT_GOSSIP_KEY=" + base64.StdEncoding.EncodeToString(key)}, env...)...)}
	c.dc.teardown()
	t.Cleanup(c.cleanup)
	start := time.Now()
	c.dc.must(t, "up", "-d")
	for _, s := range []string{"redis", "node1", "node2", "node3"} {
		c.ids[s] = c.id(s)
	}
	t.Logf("cluster up and converged in %v", c.waitConverged(start, c.members...))
	return c
}

func (c *cluster) cleanup() {
	if c.t.Failed() {
		for _, s := range append([]string{"redis"}, c.members...) {
			out, _ := command(nil, "docker", "logs", "--tail", "30", c.ids[s])
			c.t.Logf("%s log tail:\n%s", s, out)
		}
	}
	c.dc.teardown()
}

// id is the container id of a service ("" if it has none).
func (c *cluster) id(service string) string {
	return c.dc.must(c.t, "--profile", "scale", "ps", "-q", service)
}

// addr is a node's published host:port for its container port (8080 HTTP, 6380 RESP).
func (c *cluster) addr(node string, containerPort int) string {
	i, err := strconv.Atoi(strings.TrimPrefix(node, "node"))
	if err != nil {
		panic("not a node service: " + node)
	}
	return fmt.Sprintf("127.0.0.1:%s%d", c.prefix, containerPort+i-1)
}

func (c *cluster) httpAddr(node string) string { return c.addr(node, 8080) }
func (c *cluster) respAddr(node string) string { return c.addr(node, 6380) }

// get fetches a path of a node's HTTP port: the body when it answers 200.
func (c *cluster) get(node, path string) ([]byte, error) {
	resp, err := c.http.Get("http://" + c.httpAddr(node) + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s GET %s: %d %s", node, path, resp.StatusCode, body)
	}
	return body, err
}

// movesOf reads, of each node, how many times it rebuilt its ring and how many of its
// leases lapsed (its /metrics), as "node: builds/lapses" ("?" for one it could not read).
func (c *cluster) movesOf(nodes []string) []string {
	var out []string
	for _, n := range nodes {
		body, err := c.get(n, "/metrics")
		if err != nil {
			out = append(out, n+": ?")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s/%s", n, metricValue(body, "leapcount_ring_builds_total"), metricValue(body, "leapcount_lease_lapses_total")))
	}
	return out
}

// metricValue is the value of the first sample of name in a Prometheus text body ("?"
// when there is none).
func metricValue(body []byte, name string) string {
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest)
			return f[len(f)-1]
		}
	}
	return "?"
}

// view is a node's GET /v1/cluster, once its /readyz answers 200; it must show the
// suite's gossip key and cluster name in force (the compose variables reached it).
func (c *cluster) view(node string) (proctest.View, error) {
	var v proctest.View
	if _, err := c.get(node, "/readyz"); err != nil {
		return v, err
	}
	body, err := c.get(node, "/v1/cluster")
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%s /v1/cluster: %v", node, err)
	}
	if s := v.Security; s.Gossip != "encrypted" || s.RPC != "key" || s.Cluster != clusterName {
		return v, fmt.Errorf("%s security %+v; want gossip encrypted, rpc key, cluster %s (LEAPCOUNT_GOSSIP_KEY, LEAPCOUNT_CLUSTER_NAME)", node, s, clusterName)
	}
	return v, nil
}

// waitConverged waits until each of nodes is ready and they agree that exactly they
// are the members (proctest.CheckViews), and returns the time since from then.
func (c *cluster) waitConverged(from time.Time, nodes ...string) time.Duration {
	c.t.Helper()
	wait.For(c.t, convergeTimeout, func() error {
		views := make([]proctest.View, len(nodes))
		for i, n := range nodes {
			v, err := c.view(n)
			if err != nil {
				return err
			}
			views[i] = v
		}
		return proctest.CheckViews(nodes, views)
	})
	return time.Since(from).Round(time.Millisecond)
}

// waitRedis waits until every member reports Redis up (status ok) or, !up, down
// (status degraded), as README says /v1/cluster shows it.
func (c *cluster) waitRedis(up bool) {
	c.t.Helper()
	redis, status := "up", "ok"
	if !up {
		redis, status = "down", "degraded"
	}
	wait.For(c.t, 30*time.Second, func() error {
		for _, n := range c.members {
			v, err := c.view(n)
			if err != nil {
				return err
			}
			if v.Redis != redis || v.Status != status {
				return fmt.Errorf("%s: redis %q, status %q; want %q, %q", n, v.Redis, v.Status, redis, status)
			}
		}
		return nil
	})
}

// others are the members other than node.
func (c *cluster) others(node string) []string {
	return slices.DeleteFunc(slices.Clone(c.members), func(m string) bool { return m == node })
}
