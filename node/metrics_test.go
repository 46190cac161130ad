package node_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/buildinfo"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// An allow that a full node cannot decide is answered by the fail policy, marked as
// such, and counted in leapcount_fail_policy_answers_total.
func TestFailPolicyAnswersAreCounted(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) { cfg.MaxCounters = 1 })
	n := c.Nodes[0]
	var out struct {
		Allowed    bool
		Count      int64
		FailPolicy string `json:"fail_policy"`
	}
	if err := postJSON(n, "/v1/allow", `{"key":"first","window":"1m","limit":5}`, &out); err != nil || out.FailPolicy != "" || out.Count != 1 {
		t.Fatalf("first counter: got %+v, %v; want decided, count 1", out, err)
	}
	if err := postJSON(n, "/v1/allow", `{"key":"second","window":"1m","limit":5}`, &out); err != nil || out.FailPolicy != "closed" || out.Count != -1 || out.Allowed {
		t.Fatalf("a new counter on a full node: got %+v, %v; want the closed fail policy's answer", out, err)
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	for _, line := range []string{`leapcount_fail_policy_answers_total{policy="closed"} 1`, `leapcount_fail_policy_answers_total{policy="open"} 0`} {
		if !strings.Contains(string(text), line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// leapcount_build_info says which build a node runs, and GET /v1/cluster names the
// same version.
func TestBuildInfoIsExported(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	n := c.Nodes[0]
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	bi := buildinfo.Read()
	want := fmt.Sprintf(`leapcount_build_info{commit=%q,goversion=%q,version=%q} 1`, bi.ShortCommit(), runtime.Version(), bi.Version)
	if !strings.Contains(string(text), want+"\n") {
		t.Errorf("metrics lack %s", want)
	}
	var view struct{ Version string }
	if err := getJSON(n, "/v1/cluster", &view); err != nil || view.Version != bi.Version {
		t.Fatalf("/v1/cluster version %q (%v); want %q", view.Version, err, bi.Version)
	}
}
