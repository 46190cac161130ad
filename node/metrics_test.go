package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/buildinfo"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
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

// A real node's /metrics, with Redis, gRPC, a peer and traffic on every front end,
// passes `promtool check metrics` (Prometheus's own lint), holds the operator metrics
// README's table names, and every metric deploy/'s rules and dashboard use.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: make tools (scripts/ensure-ops-tools.sh) installs Debian's prometheus package")
	}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := testredis.Start(t)
	c := nodetest.MakeCluster(t, 2, func(cfg *node.Config) {
		cfg.RedisURL, cfg.GRPCAddr, cfg.Limits = rs.URL(), "127.0.0.1:0", rules
	})
	n := c.Nodes[0]
	var out struct{ Count int64 }
	if err := postJSON(n, "/v1/incr", `{"key":"k","window":"1m"}`, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := rlsClient(t, n).ShouldRateLimit(context.Background(), oneDescriptor("d", "user", "u1")); err != nil {
		t.Fatal(err)
	}
	if err := respIncr(n.RESPAddr(), "k"); err != nil {
		t.Fatal(err)
	}
	var allow struct{ Allowed bool }
	for _, want := range []bool{true, false} {
		if err := postJSON(n, "/v1/allow", `{"key":"a","window":"1m","limit":1}`, &allow); err != nil || allow.Allowed != want {
			t.Fatalf("allow: %+v, %v; want allowed %v", allow, err, want)
		}
	}
	var text []byte // both nodes' /metrics: the owner of "a" decided, and each has a peer
	for _, m := range c.Nodes {
		one := []byte(metricsText(m))
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(one)
		if lint, err := cmd.CombinedOutput(); err != nil || len(lint) > 0 {
			t.Fatalf("promtool check metrics on %s: %v\n%s", m.Name(), err, lint)
		}
		text = append(text, one...)
	}
	allowed, denied := 0.0, 0.0
	for _, m := range c.Nodes {
		allowed += scrape(m, `leapcount_decisions_total{result="allowed"}`)
		denied += scrape(m, `leapcount_decisions_total{result="denied"}`)
	}
	if allowed != 1 || denied != 1 {
		t.Errorf("decisions over the nodes: %v allowed, %v denied; want 1 and 1", allowed, denied)
	}
	exported := exportedNames(string(text))
	for _, file := range []string{"../deploy/prometheus/leapcount-rules.yaml", "../deploy/grafana/leapcount-dashboard.json"} {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`leapcount_[a-z0-9_]+`).FindAllString(string(body), -1)
		if len(names) < 5 {
			t.Fatalf("%s names only %v", file, names)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s uses %s, which a node does not export", file, name)
			}
		}
	}
	for _, name := range []string{"leapcount_build_info", "leapcount_partition_unknown_transitions_total", "leapcount_partitions", "leapcount_partitions_decided", "leapcount_partitions_undecided", "leapcount_members",
		"leapcount_writebehind_unwritten_counters", "leapcount_writebehind_oldest_unconfirmed_seconds", "leapcount_writebehind_flushes_failed_total", "leapcount_redis_up", "leapcount_grpc_requests_total",
		"leapcount_grpc_request_duration_seconds_bucket", "leapcount_http_requests_total", "leapcount_resp_commands_total",
		"leapcount_store_units", "leapcount_fail_policy_answers_total", "leapcount_lease_grants_total",
		"leapcount_lease_heartbeats_failed_total", "leapcount_lease_lapses_total", "leapcount_lease_heartbeats_sent_total",
		"leapcount_lease_heartbeats_answered_total", "leapcount_lease_voter", "leapcount_handoffs_sent_total",
		"leapcount_handoffs_received_total", "leapcount_handoff_counters_total", "leapcount_handoff_duration_seconds_bucket", "leapcount_forward_duration_seconds_bucket",
		"leapcount_forward_frames_in_flight", "leapcount_decisions_total", "leapcount_op_errors_total", "leapcount_redis_load_duration_seconds_bucket", "leapcount_resp_batch_duration_seconds_bucket",
		"leapcount_clock_offset_seconds"} {
		if !strings.Contains(string(text), "\n"+name+"{") && !strings.Contains(string(text), "\n"+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// respIncr sends one SW.INCR over RESP and reads its answer.
func respIncr(addr, key string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "*3\r\n$7\r\nSW.INCR\r\n$%d\r\n%s\r\n$5\r\n60000\r\n", len(key), key); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, ":") {
		return fmt.Errorf("SW.INCR answered %q", line)
	}
	return nil
}

// exportedNames are the metric names of a /metrics text.
func exportedNames(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// deploy/prometheus's rules pass `promtool check rules`, and their unit tests
// (`promtool test rules`: each alert fires on what should fire it, after its for).
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: make tools (scripts/ensure-ops-tools.sh) installs Debian's prometheus package")
	}
	for _, args := range [][]string{{"check", "rules", "leapcount-rules.yaml"}, {"test", "rules", "leapcount-rules.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// A join moves partitions: the node that had them counts the Handoffs it sent and the
// counters in them, the one that joined those it received. Ops forwarded afterwards
// are timed, and the load on the connection to the new owner is exported by its name.
func TestHandoffsAreCounted(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	var out struct{ Count int64 }
	for i := 0; i < 200; i++ {
		if err := postJSON(c.Nodes[0], "/v1/incr", fmt.Sprintf(`{"key":"k%d","window":"1h"}`, i), &out); err != nil {
			t.Fatal(err)
		}
	}
	joined := c.Add()
	wait.For(t, 60*time.Second, func() error {
		sent, moved := scrape(c.Nodes[0], `leapcount_handoffs_sent_total{result="ok"}`), scrape(c.Nodes[0], `leapcount_handoff_counters_total{direction="sent"}`)
		got, in := scrape(joined, "leapcount_handoffs_received_total"), scrape(joined, `leapcount_handoff_counters_total{direction="received"}`)
		if sent < 1 || got < 1 || moved < 1 || in != moved {
			return fmt.Errorf("sent %v handoffs with %v counters; received %v with %v", sent, moved, got, in)
		}
		if out, in := scrape(c.Nodes[0], `leapcount_handoff_bytes_total{direction="sent"}`), scrape(joined, `leapcount_handoff_bytes_total{direction="received"}`); out < 5*moved || in != out {
			return fmt.Errorf("%v bytes sent, %v received, for %v counters", out, in, moved)
		}
		return nil
	})
	for i := 0; i < 200; i++ {
		if err := postJSON(c.Nodes[0], "/v1/incr", fmt.Sprintf(`{"key":"k%d","window":"1h"}`, i), &out); err != nil {
			t.Fatal(err)
		}
	}
	if n := scrape(c.Nodes[0], `leapcount_member_changes_total{state="alive"}`); n != 1 {
		t.Errorf("the first node counted %v members becoming alive; want 1 (the one that joined)", n)
	}
	if n := scrape(c.Nodes[0], "leapcount_forward_duration_seconds_count"); n < 1 {
		t.Errorf("forwarded ops timed %v times; want some", n)
	}
	if series := `leapcount_forward_frames_in_flight{peer="` + joined.Name() + `"}`; scrape(c.Nodes[0], series) != 0 || !strings.Contains(metricsText(c.Nodes[0]), series+" ") {
		t.Errorf("no %s 0 at rest", series)
	}
}

func metricsText(n *node.Node) string {
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return string(text)
}

// While Redis is cut off, the write-behind's oldest unconfirmed batch ages and its
// failed sends are counted; once Redis is back the batches are confirmed and the age
// drops to 0.
func TestWriteBehindLagIsExported(t *testing.T) {
	rs := testredis.Start(t)
	relay := rs.Relay(t)
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) { cfg.RedisURL, cfg.FlushInterval = relay.URL(), 50*time.Millisecond })
	n := c.Nodes[0]
	var out struct{ Count int64 }
	if err := postJSON(n, "/v1/incr", `{"key":"before","window":"1h"}`, &out); err != nil {
		t.Fatal(err)
	}
	relay.Cut()
	if err := postJSON(n, "/v1/incr", `{"key":"before","window":"1h"}`, &out); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, func() error {
		oldest, failed := scrape(n, "leapcount_writebehind_oldest_unconfirmed_seconds"), scrape(n, "leapcount_writebehind_flushes_failed_total")
		if oldest < 0.3 || failed < 1 {
			return fmt.Errorf("Redis cut: oldest unconfirmed %vs, failed sends %v", oldest, failed)
		}
		return nil
	})
	relay.Heal()
	wait.For(t, 30*time.Second, func() error {
		if oldest := scrape(n, "leapcount_writebehind_oldest_unconfirmed_seconds"); oldest != 0 {
			return fmt.Errorf("Redis back: oldest unconfirmed %vs", oldest)
		}
		return nil
	})
}

// scrape reads one series of n's /metrics (0 when absent).
func scrape(n *node.Node, series string) float64 {
	for _, line := range strings.Split(metricsText(n), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
