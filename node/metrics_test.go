package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

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
