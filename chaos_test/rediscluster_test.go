package chaos_test

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
)

// TestRedisClusterClients runs clients nobody here wrote against three node processes
// serving --resp-cluster: redis-py's RedisCluster, redis-cli -c and redis-benchmark
// --cluster. Every answer is what one store would give, and the cluster clients send
// every op straight to its owner: no node forwards any (leapcount_forward_ops_total).
func TestRedisClusterClients(t *testing.T) {
	c := proctest.StartCluster(t, 3, proctest.Options{RESPCluster: true})
	entry := c.Node(0).Addrs()
	waitRedirects(t, c)
	before := forwardedOps(t, c)

	host, port, _ := net.SplitHostPort(entry.RESPCluster)
	_, plainPort, _ := net.SplitHostPort(entry.RESP)
	out, err := exec.Command("/usr/bin/python3", "testdata/redis_cluster_client.py", host, port, plainPort).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok:") {
		t.Fatalf("redis-py RedisCluster: %v\n%s", err, out)
	}
	t.Logf("redis-py: %s", strings.TrimSpace(string(out)))
	// The transaction went to the plain port: its 3 ops were forwarded if another node
	// owns "tx"; the cluster clients' ops never are.
	txForwards := 0
	if owner := ownerOf(t, c, "tx"); owner != c.Node(0).Name() {
		txForwards = 3
	}
	for i := 0; i < 20; i++ {
		key := fmt.Sprint("cli:", i)
		for _, want := range []string{"1", "2"} {
			got, err := exec.Command("redis-cli", "-c", "-h", host, "-p", port, "SW.INCR", key, "1h").Output()
			if err != nil || strings.TrimSpace(string(got)) != want {
				t.Fatalf("redis-cli -c SW.INCR %s: got %q (%v); want %s", key, got, err, want)
			}
		}
	}
	if got := forwardedOps(t, c) - before; got != int64(txForwards) {
		t.Fatalf("nodes forwarded %d ops; want %d (only the plain-port transaction's)", got, txForwards)
	}
	out, err = exec.Command("redis-benchmark", "--cluster", "-h", host, "-p", port, "-n", "3000", "-c", "10", "-r", "1000",
		"-q", "SW.INCR", "bench:{tag}:__rand_int__", "1h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "requests per second") || strings.Contains(string(out), "Error") {
		t.Fatalf("redis-benchmark --cluster: %v\n%s", err, out)
	}
	t.Logf("redis-benchmark --cluster: %s", lastLine(string(out)))
}

// waitRedirects waits until every node's cluster port answers -MOVED for some key it
// does not own: a new ring is used for a lease's length before keys are redirected by it.
func waitRedirects(t *testing.T, c *proctest.Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		host, port, _ := net.SplitHostPort(n.Addrs().RESPCluster)
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "SW.COUNT", fmt.Sprint("probe", i%50), "1s").CombinedOutput()
			if strings.HasPrefix(string(out), "MOVED ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never redirected a key: last answer %q", n.Name(), out)
			}
			time.Sleep(20 * time.Millisecond) // the polling interval
		}
	}
}

func forwardedOps(t *testing.T, c *proctest.Cluster) int64 {
	t.Helper()
	var n int64
	for _, nd := range c.Nodes() {
		n += metric(t, nd.HTTP(), "leapcount_forward_ops_total")
	}
	return n
}

// ownerOf is the node whose cluster port decides key rather than redirect it.
func ownerOf(t *testing.T, c *proctest.Cluster, key string) string {
	t.Helper()
	for _, n := range c.Nodes() {
		host, port, _ := net.SplitHostPort(n.Addrs().RESPCluster)
		out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "SW.COUNT", key, "1h").CombinedOutput()
		if !strings.Contains(string(out), "MOVED") {
			return n.Name()
		}
	}
	t.Fatalf("every node redirects %q", key)
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexAny(s, "\r\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
