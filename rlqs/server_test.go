package rlqs_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlqs"
	"github.com/leapcount/leapcount/rlqs/fairshare"
	"github.com/leapcount/leapcount/rlqs/rlqstest"
)

func mustRules(t *testing.T, yaml string) *limits.Rules {
	t.Helper()
	f, err := limits.Parse("rules.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := limits.Build([]*limits.File{f}, false)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// serve serves cfg's RLQS over a real socket, counting in an in-memory store on the
// wall clock; it returns the address.
func serve(t *testing.T, cfg rlqs.Config) string {
	t.Helper()
	if cfg.Decider == nil {
		cfg.Decider = &counter.Local{Store: leaparray.NewStore(), Now: func() int64 { return time.Now().UnixMilli() }}
	}
	s, err := rlqs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// greedy is a Sharer that gives every stream the whole capacity or half of it, in
// turn, as nodes whose views of a bucket's demands are partial and shifting might: the
// ledger alone must hold the limit, while buckets keep being replaced.
type greedy struct{ calls atomic.Int64 }

func (g *greedy) Share(_ context.Context, req fairshare.Request) (float64, error) {
	if g.calls.Add(1)%2 == 0 {
		return req.Capacity / 2, nil
	}
	return req.Capacity, nil
}

// Envoys whose shares add up to several times the limit, half of them with streams that
// break every few reports (each new stream is sent a new bucket), half with streams
// that last (their buckets renewed), never admit past the limit in any window: every
// bucket and every renewal is paid for in the ledger first. The ledger refuses some
// (so it is what holds the limit), and the Envoys still get a good part of it.
func TestTheLedgerHoldsTheLimitWhateverTheShares(t *testing.T) {
	const limit, window = 2000, 2 * time.Second
	rules := mustRules(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 2s, requests_per_unit: 2000}\n")
	addr := serve(t, rlqs.Config{Rules: func() *limits.Rules { return rules }, Sharer: &greedy{},
		TTL: 500 * time.Millisecond, Delivery: 100 * time.Millisecond})
	rec := rlqstest.NewAdmissions()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var breaking []*rlqstest.Envoy
	for i := 0; i < 6; i++ {
		e := &rlqstest.Envoy{Name: string(rune('a' + i)), Domain: "d", Bucket: map[string]string{"k": "v"},
			Interval: 100 * time.Millisecond, Addrs: []string{addr}, Record: rec}
		if i%2 == 0 {
			e.StreamFor = 350 * time.Millisecond
		}
		e.SetDemand(1500)
		if e.StreamFor > 0 {
			breaking = append(breaking, e)
		}
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(ctx) }()
	}
	wg.Wait()
	n, at := rec.MaxInWindow(window)
	t.Logf("at most %d admitted in any %v (limit %d)", n, window, limit)
	if n > limit {
		t.Fatalf("%d admitted in the %v from %v: the limit is %d", n, window, at, limit)
	}
	if n < limit/4 {
		t.Fatalf("at most %d admitted in any %v: the Envoys got almost nothing of a limit of %d", n, window, limit)
	}
	for _, e := range breaking {
		if e.Streams() < 5 {
			t.Fatalf("%s opened %d streams: they did not break as meant", e.Name, e.Streams())
		}
	}
}

// report sends one report of bucket on s and returns the action answered for it
// (nil when none comes within a second).
func report(t *testing.T, s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient, domain string, bucket map[string]string) *rlqspb.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	err := s.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqspb.BucketId{Bucket: bucket}, NumRequestsAllowed: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetBucketAction()) != 1 {
		t.Fatalf("answer with %d actions, want 1: %v", len(resp.GetBucketAction()), resp)
	}
	return resp.GetBucketAction()[0]
}

func open(t *testing.T, addr string) rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func blanketOf(a *rlqspb.RateLimitQuotaResponse_BucketAction) (typev3.RateLimitStrategy_BlanketRule, bool) {
	s, ok := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	if !ok {
		return 0, false
	}
	return s.BlanketRule, true
}

// An unlimited rule, or none, is ALLOW_ALL; a limit of zero DENY_ALL; a limited bucket
// gets a token bucket with the time to live configured; once its rule is gone it is
// abandoned, and then, like any bucket without a rule, allowed.
func TestBucketActions(t *testing.T) {
	var rules atomic.Pointer[limits.Rules]
	rules.Store(mustRules(t, `domain: d
descriptors:
  - key: open
    rate_limit: {unlimited: true}
  - key: closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 6000}
`))
	addr := serve(t, rlqs.Config{Rules: rules.Load, TTL: 3 * time.Second})
	s := open(t, addr)
	for _, c := range []struct {
		bucket map[string]string
		want   typev3.RateLimitStrategy_BlanketRule
	}{
		{map[string]string{"open": "x"}, typev3.RateLimitStrategy_ALLOW_ALL},
		{map[string]string{"closed": "x"}, typev3.RateLimitStrategy_DENY_ALL},
		{map[string]string{"nothing": "x"}, typev3.RateLimitStrategy_ALLOW_ALL},
	} {
		a := report(t, s, "d", c.bucket)
		if got, ok := blanketOf(a); !ok || got != c.want {
			t.Fatalf("bucket %v: %v, want blanket %v", c.bucket, a, c.want)
		}
	}
	a := report(t, s, "", map[string]string{"tenant": "acme"})
	tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil || tb.GetTokensPerFill().GetValue() == 0 || tb.GetFillInterval().AsDuration() < time.Second {
		t.Fatalf("tenant=acme: %v, want a token bucket", a)
	}
	if ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != 3*time.Second {
		t.Fatalf("time to live %v, want the configured 3s", ttl)
	}
	rules.Store(mustRules(t, "domain: d\ndescriptors:\n  - key: open\n    rate_limit: {unlimited: true}\n"))
	if a := report(t, s, "", map[string]string{"tenant": "acme"}); a.GetAbandonAction() == nil {
		t.Fatalf("tenant=acme after its rule went: %v, want abandon_action", a)
	}
	if got, ok := blanketOf(report(t, s, "", map[string]string{"tenant": "acme"})); !ok || got != typev3.RateLimitStrategy_ALLOW_ALL {
		t.Fatalf("tenant=acme reported again after it was abandoned: want ALLOW_ALL")
	}
}

// Bad reports end their stream with a clear status, and the server goes on serving.
func TestBadReportsGetClearErrors(t *testing.T) {
	var rules atomic.Pointer[limits.Rules]
	rules.Store(mustRules(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"))
	addr := serve(t, rlqs.Config{Rules: rules.Load})
	big := map[string]string{}
	for i := 0; i < 65; i++ {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	for _, c := range []struct {
		name string
		reps []*rlqspb.RateLimitQuotaUsageReports
		code codes.Code
	}{
		{"no domain", []*rlqspb.RateLimitQuotaUsageReports{{}}, codes.InvalidArgument},
		{"no bucket id", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "d", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{}}}}, codes.InvalidArgument},
		{"65 entries", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "d", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{BucketId: &rlqspb.BucketId{Bucket: big}}}}}, codes.InvalidArgument},
		{"domain changed", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "d"}, {Domain: "e"}}, codes.InvalidArgument},
		{"a bucket twice", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "d", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"k": "v"}}}, {BucketId: &rlqspb.BucketId{Bucket: map[string]string{"k": "v"}}}}}}, codes.InvalidArgument},
	} {
		s := open(t, addr)
		for _, r := range c.reps {
			if err := s.Send(r); err != nil {
				break
			}
		}
		var err error
		for err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != c.code {
			t.Fatalf("%s: %v, want %v", c.name, err, c.code)
		}
	}
	rules.Store(nil)
	s := open(t, addr)
	s.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "d"})
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("with no rules loaded: %v, want Unavailable", err)
	}
}

// A client that sends reports and never reads the answers holds its stream no longer
// than the send timeout: the server ends it, and no goroutine of it waits on.
func TestAClientThatDoesNotReadIsCutOff(t *testing.T) {
	rules := mustRules(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n")
	reg := prometheus.NewRegistry()
	addr := serve(t, rlqs.Config{Rules: func() *limits.Rules { return rules }, SendTimeout: 300 * time.Millisecond, Registerer: reg})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	usages := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, 500)
	for i := range usages {
		usages[i] = &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"k": strings.Repeat("v", 20) + strconv.Itoa(i)}}}
	}
	rep := &rlqspb.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: usages}
	go func() {
		for s.Send(rep) == nil { // until the server stops reading, or the test ends
		}
	}()
	wait.For(t, 10*time.Second, func() error {
		stalled, streams := gauge(t, reg, "leapcount_rlqs_stalled_streams_total"), gauge(t, reg, "leapcount_rlqs_streams")
		if stalled != 1 || streams != 0 {
			return fmt.Errorf("%v streams cut off, %v open; want 1 and 0", stalled, streams)
		}
		return nil
	})
}

// gauge is the value of the metric named name in reg (a gauge or a counter).
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
