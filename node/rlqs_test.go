package node_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
	"github.com/leapcount/leapcount/rlqs"
	"github.com/leapcount/leapcount/rlqs/rlqstest"
)

// The RLQS tests' rules: tenant buckets get 6000 requests in any 10 s.
const rlqsRules = `domain: quota
descriptors:
  - key: tenant
    rate_limit: {window: 10s, requests_per_unit: 6000}
  - key: open
    rate_limit: {unlimited: true}
`

const (
	rlqsLimit    = 6000
	rlqsWindow   = 10 * time.Second
	rlqsInterval = 300 * time.Millisecond
)

// rlqsCluster is three nodes serving RLQS on --grpc, on the wall clock (the Envoys'
// admissions are checked against real windows), assignments living 1 s.
func rlqsCluster(t *testing.T) *nodetest.Cluster {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rlqsRules), 0o644); err != nil {
		t.Fatal(err)
	}
	return nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", filepath.Join(dir, "rules.yaml")
		cfg.RLQSTTL, cfg.RLQSDelivery = time.Second, 250*time.Millisecond
		cfg.Now = nil
	})
}

// envoys starts one simulated Envoy per demand on bucket tenant=acme, the i-th
// streaming to node i%3 first, then to the others in turn.
func envoys(ctx context.Context, c *nodetest.Cluster, rec *rlqstest.Admissions, demands ...float64) ([]*rlqstest.Envoy, *sync.WaitGroup) {
	var addrs []string
	for _, n := range c.Running() {
		addrs = append(addrs, n.GRPCAddr())
	}
	var wg sync.WaitGroup
	out := make([]*rlqstest.Envoy, len(demands))
	for i, d := range demands {
		var from []string // node i%3 first, then the others in turn
		for j := range addrs {
			from = append(from, addrs[(i+j)%len(addrs)])
		}
		e := &rlqstest.Envoy{Name: fmt.Sprintf("envoy-%d", i), Domain: "quota", Bucket: map[string]string{"tenant": "acme"},
			Interval: rlqsInterval, Record: rec, Addrs: from}
		e.SetDemand(d)
		out[i] = e
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(ctx) }()
	}
	return out, &wg
}

// fairShares is the max-min fair split of total among demands.
func fairShares(demands []float64, total float64) []float64 {
	shares := make([]float64, len(demands))
	left, open := total, len(demands)
	done := make([]bool, len(demands))
	for open > 0 {
		level := left / float64(open)
		settled := false
		for i, d := range demands {
			if !done[i] && d <= level {
				shares[i], done[i], settled = d, true, true
				left -= d
				open--
			}
		}
		if !settled {
			for i := range demands {
				if !done[i] {
					shares[i] = level
				}
			}
			break
		}
	}
	return shares
}

// checkFair checks that each Envoy admitted within 10% of its max-min fair share of
// what they all admitted in [from, to).
func checkFair(t *testing.T, rec *rlqstest.Admissions, es []*rlqstest.Envoy, demands []float64, from, to time.Time) {
	t.Helper()
	got := make([]float64, len(es))
	total := 0.0
	for i, e := range es {
		got[i] = float64(rec.Between(e.Name, from, to)) / to.Sub(from).Seconds()
		total += got[i]
	}
	// The fleet asks more than the limit allows: it must get a good part of it, or
	// an answer that denies everything would pass for a fair one. Assignments are paid
	// for ahead of their use (rlqs' doc.go), so with this test's 10 s window and 1.25 s
	// assignment life it gets about half of the limit's rate.
	if floor := 0.35 * rlqsLimit / rlqsWindow.Seconds(); total < floor {
		t.Errorf("the Envoys admitted %.1f/s in all, less than %.0f/s of a limit of %d in %v", total, floor, rlqsLimit, rlqsWindow)
	}
	fair := fairShares(demands, total)
	for i := range es {
		if math.Abs(got[i]-fair[i]) > 0.1*fair[i] {
			t.Errorf("%s (demand %.0f/s) admitted %.1f/s, its max-min fair share of the %.1f/s admitted is %.1f/s (all: %.1f, fair %.1f)",
				es[i].Name, demands[i], got[i], total, fair[i], got, fair)
		}
	}
	t.Logf("admitted %.1f/s in all, by Envoy %.1f, max-min fair %.1f", total, got, fair)
}

// Envoys on all three nodes with skewed demand, which then shifts, each enforcing
// the token buckets it is sent: the fleet never admits past the limit in any window,
// and three reporting intervals after each shift every Envoy admits within 10% of its
// max-min fair share.
func TestRLQSSharesALimitFairlyAcrossTheCluster(t *testing.T) {
	c := rlqsCluster(t)
	rec := rlqstest.NewAdmissions()
	ctx, cancel := context.WithCancel(context.Background())
	demands := []float64{40, 80, 300, 600}
	es, wg := envoys(ctx, c, rec, demands...)
	defer func() { cancel(); wg.Wait() }()

	phase := 4 * time.Second
	start := time.Now()
	time.Sleep(phase) // the load runs for this long: not a wait for a condition
	checkFair(t, rec, es, demands, start.Add(3*rlqsInterval+time.Second), time.Now())

	shifted := []float64{600, 300, 80, 40}
	for i, e := range es {
		e.SetDemand(shifted[i])
	}
	start = time.Now()
	time.Sleep(phase)
	checkFair(t, rec, es, shifted, start.Add(3*rlqsInterval+time.Second), time.Now())
	cancel()
	wg.Wait()

	if n, at := rec.MaxInWindow(rlqsWindow); n > rlqsLimit {
		t.Fatalf("%d admitted in the 10 s from %v: the limit is %d", n, at, rlqsLimit)
	} else {
		t.Logf("at most %d admitted in any 10 s (limit %d)", n, rlqsLimit)
	}
}

// The RLQS service is on --grpc beside ShouldRateLimit: reflection lists it, health
// answers SERVING for it, and a stream outlives --grpc's request timeout (its request
// lasts as long as the stream, by design).
func TestRLQSIsServedOnTheGRPCPort(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rlqsRules), 0o644); err != nil {
		t.Fatal(err)
	}
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", filepath.Join(dir, "rules.yaml")
		cfg.GRPCRequestTimeout = 500 * time.Millisecond
	})
	conn, err := grpc.NewClient(c.Nodes[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	rs, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, rlqs.ServiceName) {
		t.Fatalf("reflection lists %v, not %s", names, rlqs.ServiceName)
	}
	// Done with reflection: a reflection stream left open past the request timeout
	// would cost the connection (h2grpc's stall check), RLQS's stream with it.
	rs.CloseSend()
	for _, err := rs.Recv(); err == nil; _, err = rs.Recv() {
	}
	wait.For(t, 5*time.Second, func() error {
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlqs.ServiceName})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health of %s: %v %v", rlqs.ServiceName, h, err)
		}
		return nil
	})

	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	for time.Since(opened) < 2*time.Second { // four request timeouts
		err := s.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "quota", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"tenant": "acme"}}, NumRequestsAllowed: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("the stream ended %v after it opened: %v", time.Since(opened), err)
		}
		if resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() == nil {
			t.Fatalf("tenant=acme: %v, want a token bucket", resp)
		}
		time.Sleep(200 * time.Millisecond) // an Envoy's reporting interval
	}
}
