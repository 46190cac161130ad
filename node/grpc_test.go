package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// configMap lays out dir as Kubernetes mounts a ConfigMap: each file a link through
// ..data, a link to a hidden timestamped directory; swap replaces that link at once.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func (c *configMap) swap(files map[string]string) {
	c.t.Helper()
	c.gen++
	data := fmt.Sprintf("..gen_%d", c.gen)
	must := func(err error) {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(c.dir, data), 0o755))
	for name, body := range files {
		must(os.WriteFile(filepath.Join(c.dir, data, name), []byte(body), 0o644))
		if _, err := os.Lstat(filepath.Join(c.dir, name)); os.IsNotExist(err) {
			must(os.Symlink(filepath.Join("..data", name), filepath.Join(c.dir, name)))
		}
	}
	must(os.Symlink(data, filepath.Join(c.dir, "..data_tmp")))
	must(os.Rename(filepath.Join(c.dir, "..data_tmp"), filepath.Join(c.dir, "..data")))
}

func rlsClient(t *testing.T, n *node.Node) rlspb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

func oneDescriptor(domain, key, value string) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*commonpb.RateLimitDescriptor{
		{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}}
}

// Every node of a cluster answers Envoy's ShouldRateLimit on --grpc from the rules of
// --limits, each descriptor counted once, on its counter's owner; the rules are read
// again when a ConfigMap-style directory is swapped, and a bad config keeps the rules
// in force (counted in leapcount_rls_config_reloads_total).
func TestGRPCRateLimitServiceAcrossTheCluster(t *testing.T) {
	cm := &configMap{t: t, dir: t.TempDir()}
	cm.swap(map[string]string{"rules.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"})
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", cm.dir
	})
	ctx := context.Background()
	var clients []rlspb.RateLimitServiceClient
	for _, n := range c.Nodes {
		clients = append(clients, rlsClient(t, n))
	}
	for i := 0; i < 8; i++ {
		resp, err := clients[i%3].ShouldRateLimit(ctx, oneDescriptor("edge", "user", "alice"))
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		want := rlspb.RateLimitResponse_OK
		if i >= 5 {
			want = rlspb.RateLimitResponse_OVER_LIMIT
		}
		if resp.OverallCode != want {
			t.Fatalf("request %d through node %d: %v; want %v (5 an hour, counted once across the nodes)", i+1, i%3, resp, want)
		}
	}

	cm.swap(map[string]string{"rules.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n  - key: ip\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"})
	for i, cl := range clients {
		if err := wait.Until(10*time.Second, func() error {
			resp, err := cl.ShouldRateLimit(ctx, oneDescriptor("edge", "ip", fmt.Sprintf("10.0.0.%d", i)))
			if err != nil || resp.Statuses[0].CurrentLimit == nil {
				return fmt.Errorf("ip rule not in force yet: %v, %v", resp, err)
			}
			return nil
		}); err != nil {
			t.Fatalf("node %d after the ConfigMap swap: %v", i, err)
		}
	}

	cm.swap(map[string]string{"rules.yaml": "domain: edge\ndescriptors:\n  - key: user\n    rate_limt: {unit: hour}\n"})
	if err := wait.Until(10*time.Second, func() error {
		body := metricsOf(t, c.Nodes[0])
		if !strings.Contains(body, `leapcount_rls_config_reloads_total{result="error"}`) {
			return fmt.Errorf("no failed reload counted yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := clients[0].ShouldRateLimit(ctx, oneDescriptor("edge", "ip", "10.9.9.9"))
	if err != nil || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("after a bad config: %v, %v; want the ip rule still in force", resp, err)
	}
}

func metricsOf(t *testing.T, n *node.Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A bad --limits stops the node at start with the file and line.
func TestBadLimitsFailTheStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := (&nodetest.Cluster{Clock: nodetest.NewClock()}).Config("node-0")
	cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", path
	n, err := node.Start(cfg)
	if err == nil {
		n.Stop(context.Background())
		t.Fatal("started with a bad --limits")
	}
	if !strings.Contains(err.Error(), "rules.yaml:4: invalid rate limit unit 'fortnight'") {
		t.Fatalf("error %q; want the file, line and unit named", err)
	}
}

// gRPC health says NOT_SERVING while no rules are loaded (no --limits), when every
// ShouldRateLimit is answered UNAVAILABLE, and SERVING on a node with rules, as
// envoyproxy/ratelimit's with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED. Before, a node
// without rules said SERVING.
func TestGRPCHealthWantsRules(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limits string
		want   healthpb.HealthCheckResponse_ServingStatus
	}{{"", healthpb.HealthCheckResponse_NOT_SERVING}, {rules, healthpb.HealthCheckResponse_SERVING}} {
		n := nodetest.MakeCluster(t, 1, func(cfg *node.Config) { cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", c.limits }).Nodes[0]
		conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		health := healthpb.NewHealthClient(conn)
		check := func() error {
			for _, service := range []string{"", rlspb.RateLimitService_ServiceDesc.ServiceName} {
				r, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
				if err != nil {
					return err
				}
				if r.Status != c.want {
					return fmt.Errorf("service %q: %v", service, r.Status)
				}
			}
			return nil
		}
		wait.ForTrue(t, 10*time.Second, n.Ready)
		if err := wait.Until(10*time.Second, check); err != nil {
			t.Fatalf("--limits %q: health %v; want %v", c.limits, err, c.want)
		}
		// Health follows readiness, polled every 200 ms: NOT_SERVING must outlast the
		// node's turning ready by several polls, not be what it said before.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(time.Second); c.limits == "" && time.Now().Before(end); <-tick.C {
			if err := check(); err != nil {
				t.Fatalf("without --limits, once the node is ready: %v; want NOT_SERVING", err)
			}
		}
		if c.limits == "" { // and the calls it stands for are indeed refused
			_, err := rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), oneDescriptor("edge", "user", "a"))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("ShouldRateLimit without rules: %v; want UNAVAILABLE", err)
			}
		}
	}
}
