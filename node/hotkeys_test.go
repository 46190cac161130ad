package node_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// GET /v1/hotkeys on a key's owner names it first when it takes most of the ops, with
// an estimate of its ops within the sketch's bounds; whichever node the ops came in by.
func TestHotKeysNameTheBusiestKeyOnItsOwner(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, nil)
	const hotOps = 3000
	for i := 0; i < hotOps; i++ {
		var out struct{ Count int64 }
		if err := postJSON(c.Nodes[i%3], "/v1/incr", `{"key":"hot","window":"1m"}`, &out); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := postJSON(c.Nodes[i%3], "/v1/incr", fmt.Sprintf(`{"key":"cold%d","window":"1m"}`, i), &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	type report struct {
		Node        string
		SampleEvery int `json:"sample_every"`
		Keys        []struct {
			Key   string
			Ops   int64
			Error int64
		}
	}
	found := 0
	for _, n := range c.Nodes {
		var r report
		if err := getJSON(n, "/v1/hotkeys?n=5", &r); err != nil {
			t.Fatal(err)
		}
		if r.Node != n.Name() || len(r.Keys) > 5 {
			t.Fatalf("%s: %+v", n.Name(), r)
		}
		if len(r.Keys) == 0 || r.Keys[0].Key != "hot" {
			for _, k := range r.Keys {
				if k.Key == "hot" {
					t.Fatalf("%s: hot listed but not first: %+v", n.Name(), r)
				}
			}
			continue
		}
		found++
		// Sampling one op in SampleEvery: the estimate is within a few standard
		// deviations of the true count (sd = sqrt(n*(every-1))).
		if got := r.Keys[0].Ops; got < hotOps/2 || got > hotOps*2 {
			t.Errorf("%s: hot estimated at %d ops; want near %d", n.Name(), got, hotOps)
		}
	}
	if found != 1 {
		t.Fatalf("hot first on %d nodes; want exactly its owner", found)
	}
	for _, bad := range []string{"0", "-1", "x", "1001"} {
		err := getJSON(c.Nodes[0], "/v1/hotkeys?n="+bad, new(report))
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("n=%s: %v; want 400", bad, err)
		}
	}
}

// GET /v1/hotkeys?scope=cluster on any node merges every member's top keys: each key
// with the member that decided it (its owner), in order of ops, whichever node the ops
// came in by, and no member missing.
func TestClusterHotKeysMergeEveryMembers(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, nil)
	rg := c.Nodes[0].Router().Ring()
	ops := map[string]int{} // a key owned by each node, and the ops sent on it
	owner := map[string]string{}
	for i, want := range []int{3000, 1500, 600} {
		for k := 0; ; k++ {
			key := fmt.Sprintf("busy-%d-%d", i, k)
			if m, _ := rg.Owner(key); m.Name == c.Nodes[i].Name() {
				ops[key], owner[key] = want, m.Name
				break
			}
		}
	}
	cl := respClient(t, c.Nodes[0]) // two of the three keys are forwarded
	ctx := context.Background()
	for key, n := range ops {
		for sent := 0; sent < n; sent += 100 {
			p := cl.Pipeline()
			for range 100 {
				p.Do(ctx, "SW.INCR", key, "1m")
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var r node.ClusterHotKeysView
	if err := getJSON(c.Nodes[1], "/v1/hotkeys?scope=cluster&n=3", &r); err != nil {
		t.Fatal(err)
	}
	if r.Node != c.Nodes[1].Name() || len(r.Members) != 3 || len(r.Missing) != 0 || len(r.Keys) != 3 {
		t.Fatalf("got %+v; want all 3 members, none missing, 3 keys", r)
	}
	for i, k := range r.Keys {
		want := ops[k.Key]
		if want == 0 || !slices.Equal(k.Nodes, []string{owner[k.Key]}) {
			t.Fatalf("key %d: %+v; want one of %v, decided on its owner", i, k, owner)
		}
		if i > 0 && want > ops[r.Keys[i-1].Key] {
			t.Fatalf("keys out of order: %+v", r.Keys)
		}
		if k.Ops < uint64(want/2) || k.Ops > uint64(want*2) || k.Low > k.Ops || k.High < k.Ops {
			t.Errorf("%s: %d ops sent; estimated at %d (%d-%d)", k.Key, want, k.Ops, k.Low, k.High)
		}
	}
	if err := getJSON(c.Nodes[0], "/v1/hotkeys?scope=everywhere", new(node.ClusterHotKeysView)); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("scope=everywhere: %v; want 400", err)
	}
}

// A hot key sliced to the nodes it comes in by is decided there too, from their slices:
// the cluster's hot keys count those ops on the nodes that decided them (not only on
// the owner, which sees a fraction of them), name those nodes, and mark the key sliced;
// so does each borrower's own report.
func TestClusterHotKeysCountOpsDecidedFromSlices(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) { cfg.Slices, cfg.SliceAfter = true, 5 })
	owner := ownerNode(t, c, "hot")
	const each = 3000 // allows sent through each node that does not own "hot"
	var borrowers []*node.Node
	ctx := context.Background()
	for _, n := range c.Nodes {
		if n == owner {
			continue
		}
		borrowers = append(borrowers, n)
		cl := respClient(t, n)
		for sent := 0; sent < each; sent += 100 {
			p := cl.Pipeline()
			for range 100 {
				p.Do(ctx, "SW.ALLOW", "hot", "1m", 1_000_000)
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var r node.ClusterHotKeysView
	if err := getJSON(owner, "/v1/hotkeys?scope=cluster&n=3", &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Keys) == 0 || r.Keys[0].Key != "hot" || len(r.Missing) != 0 {
		t.Fatalf("got %+v; want \"hot\" first, no member missing", r)
	}
	k := r.Keys[0]
	total := len(borrowers) * each
	if k.Ops < uint64(total/2) || k.Ops > uint64(total*2) || !k.Sliced {
		t.Errorf("hot: %+v; want about %d ops (every allow, wherever decided), marked sliced", k, total)
	}
	for _, n := range borrowers {
		spent := scrape(n, "leapcount_slices_spent_total")
		// One op in 16 is sampled: 320 ops decided leave none sampled with odds
		// (15/16)^320, about 1e-9.
		if spent >= 320 && !slices.Contains(k.Nodes, n.Name()) {
			t.Errorf("%s decided %v allows from slices; the cluster's report names only %v", n.Name(), spent, k.Nodes)
		}
		t.Logf("%s: %v allows decided from slices", n.Name(), spent)
		if spent < 320 {
			continue
		}
		var own node.HotKeysView
		if err := getJSON(n, "/v1/hotkeys?n=3", &own); err != nil {
			t.Fatal(err)
		}
		if len(own.Keys) == 0 || own.Keys[0].Key != "hot" || !own.Keys[0].Sliced {
			t.Errorf("%s's own hot keys %+v: want \"hot\" first, marked sliced", n.Name(), own)
		}
	}
}
