package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

type allowAnswer struct {
	Allowed    bool
	Count      int64
	Remaining  int64
	FailPolicy string `json:"fail_policy"`
	Sliced     bool
}

// One hot counter, its allows sent through every node at once over HTTP: the nodes that
// do not own it ask for slices and decide allows from them, marked sliced; nothing is
// admitted past the limit; and once the slices are given back, the owner admits what is
// left, so that exactly the limit was admitted in all.
func TestAHotCounterIsSlicedAndAdmitsExactlyItsLimit(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) { cfg.Slices, cfg.SliceAfter = true, 5 })
	const limit, callers, each = 3000, 12, 400
	body := fmt.Sprintf(`{"key":"hot","window":"1m","limit":%d}`, limit)
	var admitted, sliced atomic.Int64
	allow := func(n *node.Node) bool {
		var out allowAnswer
		if err := postJSON(n, "/v1/allow", body, &out); err != nil {
			t.Error(err)
			return false
		}
		if out.FailPolicy != "" {
			t.Errorf("allow answered by the fail policy (%s) in a healthy cluster", out.FailPolicy)
		}
		if out.Allowed {
			admitted.Add(1)
		}
		if out.Sliced {
			sliced.Add(1)
			if !out.Allowed || out.Count < 1 || out.Count > limit || out.Remaining != limit-out.Count {
				t.Errorf("a sliced answer %+v: want allowed, an estimate within the limit", out)
			}
		}
		return out.Allowed
	}
	var wg sync.WaitGroup
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func(n *node.Node) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				allow(n)
			}
		}(c.Nodes[w%len(c.Nodes)])
	}
	wg.Wait()
	if got := admitted.Load(); got > limit {
		t.Fatalf("admitted %d; the limit is %d", got, limit)
	}
	if sliced.Load() == 0 {
		t.Fatal("no allow was decided from a slice")
	}
	owner := ownerNode(t, c, "hot")
	var hot struct {
		Keys   []struct{ Key string }
		Sliced []string
	}
	if err := getJSON(owner, "/v1/hotkeys?n=5", &hot); err != nil {
		t.Fatal(err)
	}
	if len(hot.Keys) == 0 || hot.Keys[0].Key != "hot" || len(hot.Sliced) != 1 || hot.Sliced[0] != "hot" {
		t.Errorf("the owner's hot keys %+v: want \"hot\" first, marked sliced", hot)
	}
	held := func() error {
		for _, n := range c.Nodes {
			if h := scrape(n, "leapcount_slices_held"); h != 0 {
				return fmt.Errorf("%s holds %v slices", n.Name(), h)
			}
		}
		return nil
	}
	wait.For(t, 10*time.Second, held)
	for allow(owner) {
	}
	t.Logf("%d allows decided from slices; %d admitted in all", sliced.Load(), admitted.Load())
	if got := admitted.Load(); got != limit {
		t.Fatalf("admitted %d in all once the slices were given back; want %d", got, limit)
	}
	var spent float64
	for _, n := range c.Nodes {
		spent += scrape(n, "leapcount_slices_spent_total")
	}
	if spent != float64(sliced.Load()) {
		t.Errorf("metrics: %v slice units spent; want %d", spent, sliced.Load())
	}
}

// A slice its borrower did not spend is given back when it ends: the counter then
// counts exactly the allows admitted.
func TestUnspentSlicesAreGivenBack(t *testing.T) {
	c := nodetest.MakeCluster(t, 2, func(cfg *node.Config) { cfg.Slices, cfg.SliceAfter = true, 5 })
	owner, other := ownerNode(t, c, "warm"), c.Nodes[0]
	if other == owner {
		other = c.Nodes[1]
	}
	admitted, sliced := 0, 0
	for i := 0; i < 50; i++ {
		var out allowAnswer
		if err := postJSON(other, "/v1/allow", `{"key":"warm","window":"1m","limit":100000}`, &out); err != nil {
			t.Fatal(err)
		}
		if out.Allowed {
			admitted++
		}
		if out.Sliced {
			sliced++
		}
	}
	if sliced == 0 {
		t.Fatal("no allow was decided from a slice")
	}
	var count struct{ Count int64 }
	wait.For(t, 10*time.Second, func() error {
		if err := getJSON(owner, "/v1/count?key=warm&window=1m", &count); err != nil {
			return err
		}
		if count.Count != int64(admitted) {
			return fmt.Errorf("the owner counts %d; %d were admitted", count.Count, admitted)
		}
		return nil
	})
	if got := scrape(other, "leapcount_slices_returned_total"); got < 1 {
		t.Errorf("leapcount_slices_returned_total %v; want at least 1", got)
	}
	lent, back := scrape(owner, "leapcount_slices_lent_total"), scrape(owner, "leapcount_slices_taken_back_total")
	if borrowed := scrape(other, "leapcount_slices_borrowed_total"); lent != borrowed || back < 1 {
		t.Errorf("the owner lent %v slices (the borrower got %v) and took back %v; want as many, and at least one back", lent, borrowed, back)
	}
}

// Without --slices every allow is forwarded: none is sliced, however hot.
func TestSlicesOffForwardsEveryAllow(t *testing.T) {
	c := nodetest.MakeCluster(t, 2, func(cfg *node.Config) { cfg.SliceAfter = 1 })
	other := c.Nodes[0]
	if ownerNode(t, c, "hot") == other {
		other = c.Nodes[1]
	}
	for i := 0; i < 200; i++ {
		var out allowAnswer
		if err := postJSON(other, "/v1/allow", `{"key":"hot","window":"1m","limit":1000}`, &out); err != nil {
			t.Fatal(err)
		}
		if out.Sliced || out.Count != int64(i+1) {
			t.Fatalf("allow %d: %+v; want decided by the owner, count %d", i+1, out, i+1)
		}
	}
}

// ownerNode is the node that owns key.
func ownerNode(t *testing.T, c *nodetest.Cluster, key string) *node.Node {
	t.Helper()
	m, ok := c.Nodes[0].Router().Ring().Owner(key)
	if !ok {
		t.Fatal("no owner")
	}
	for _, n := range c.Nodes {
		if n.Name() == m.Name {
			return n
		}
	}
	t.Fatalf("owner %s is not running", m.Name)
	return nil
}

// Envoy's ShouldRateLimit through every node at once, one hot descriptor: with
// --slices the nodes that do not own its counter answer from slices, and OK is never
// answered past the rule's limit; the counter counts every hit, as envoyproxy/ratelimit
// does, and no more than were sent.
func TestShouldRateLimitOfAHotDescriptorIsSliced(t *testing.T) {
	cm := &configMap{t: t, dir: t.TempDir()}
	const limit, callers, each = 2000, 12, 250
	cm.swap(map[string]string{"rules.yaml": fmt.Sprintf("domain: edge\ndescriptors:\n  - key: api\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", limit)})
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		cfg.GRPCAddr, cfg.Limits, cfg.Slices, cfg.SliceAfter = "127.0.0.1:0", cm.dir, true, 5
	})
	ctx := context.Background()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < callers; w++ {
		cl := rlsClient(t, c.Nodes[w%3])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				resp, err := cl.ShouldRateLimit(ctx, oneDescriptor("edge", "api", "all"))
				if err != nil {
					t.Error(err)
					return
				}
				if resp.OverallCode == rlspb.RateLimitResponse_OK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var spent float64
	for _, n := range c.Nodes {
		spent += scrape(n, "leapcount_slices_spent_total")
	}
	t.Logf("%d OK of %d, %v hits decided from slices", ok.Load(), callers*each, spent)
	if ok.Load() > limit {
		t.Fatalf("%d answered OK; the limit is %d", ok.Load(), limit)
	}
	if spent == 0 {
		t.Fatal("no hit was decided from a slice")
	}
	var count struct{ Count int64 }
	wait.For(t, 10*time.Second, func() error {
		if err := getJSON(c.Nodes[0], "/v1/count?key=rls:edge:api=all&window=1h", &count); err != nil {
			return err
		}
		if count.Count != callers*each {
			return fmt.Errorf("the counter counts %d hits; %d were sent (slices not all back yet?)", count.Count, callers*each)
		}
		return nil
	})
}
