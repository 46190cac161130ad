package node_test

import (
	"fmt"
	"strings"
	"testing"

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
