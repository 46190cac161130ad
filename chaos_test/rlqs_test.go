package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/rlqs/rlqstest"
)

// The RLQS fault test's rule: 6000 requests in any 10 s for each tenant.
const (
	rlqsFaultLimit  = 6000
	rlqsFaultWindow = 10 * time.Second
	rlqsFaultRules  = "domain: quota\ndescriptors:\n  - key: tenant\n    rate_limit: {window: 10s, requests_per_unit: 6000}\n"
	rlqsLedgerKey   = "rlqs:quota:tenant=acme"
)

// Six simulated Envoys stream to three node processes; a node that holds streams, but
// not the bucket's ledger, is killed (SIGKILL) mid-stream. Its Envoys keep their
// assignments until they expire and stream to the others again; the fleet never
// admits past the limit in any window, and goes on admitting once they have.
func TestRLQSNodeKilledMidStream(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(rlqsFaultRules), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--limits", rules, "--rlqs-ttl", "1s", "--rlqs-delivery", "250ms"}, fastDetection...)
	c := proctest.StartCluster(t, 3, proctest.Options{Args: args, GRPC: true, RESPCluster: true})
	owner := keyOwner(t, c, rlqsLedgerKey, "10s")
	victim := c.Node((owner + 1) % 3)
	t.Logf("the ledger is on node-%d; killing %s", owner, victim.Name())

	rec := rlqstest.NewAdmissions()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var onVictim []*rlqstest.Envoy
	for i := 0; i < 6; i++ {
		first := c.Node(i % 3)
		var addrs []string
		for j := 0; j < 3; j++ {
			addrs = append(addrs, c.Node((i+j)%3).GRPC())
		}
		e := &rlqstest.Envoy{Name: fmt.Sprintf("envoy-%d", i), Domain: "quota", Bucket: map[string]string{"tenant": "acme"},
			Interval: 300 * time.Millisecond, Addrs: addrs, Record: rec}
		e.SetDemand(float64(100 * (i + 1)))
		if first == victim {
			onVictim = append(onVictim, e)
		}
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(ctx) }()
	}
	time.Sleep(4 * time.Second) // load before the kill: not a wait for a condition
	killed := time.Now()
	victim.Kill()
	time.Sleep(8 * time.Second) // load after it
	cancel()
	wg.Wait()

	n, at := rec.MaxInWindow(rlqsFaultWindow)
	t.Logf("at most %d admitted in any %v (limit %d)", n, rlqsFaultWindow, rlqsFaultLimit)
	if n > rlqsFaultLimit {
		t.Fatalf("%d admitted in the %v from %v: the limit is %d", n, rlqsFaultWindow, at, rlqsFaultLimit)
	}
	for _, e := range onVictim {
		if e.Streams() < 2 {
			t.Fatalf("%s streamed to the killed node and opened no stream since", e.Name)
		}
		if got := rec.Between(e.Name, killed.Add(4*time.Second), time.Now()); got == 0 {
			t.Fatalf("%s admitted nothing in the 4 s to the end, from 4 s after the kill", e.Name)
		}
	}
}

// keyOwner is the index of the node that owns the counter key (of window): node 0's
// --resp-cluster port answers -MOVED with its owner's address, or the count itself.
func keyOwner(t *testing.T, c *proctest.Cluster, key, window string) int {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: c.Node(0).Addrs().RESPCluster})
	defer rc.Close()
	err := rc.Do(context.Background(), "SW.COUNT", key, window).Err()
	if err == nil {
		return 0
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "MOVED ") {
		t.Fatalf("SW.COUNT on --resp-cluster: %v", err)
	}
	addr := msg[strings.LastIndexByte(msg, ' ')+1:]
	for i := 0; i < 3; i++ {
		if c.Node(i).Addrs().RESPCluster == addr {
			return i
		}
	}
	t.Fatalf("-MOVED to %s, no node's --resp-cluster", addr)
	return -1
}
