package rlsapi

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/route"
	"github.com/leapcount/leapcount/rpc"
)

// epoch is a wall-clock instant on a day's boundary: the tests' clocks start there.
var epoch = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

type fixture struct {
	client rlspb.RateLimitServiceClient
	conn   *grpc.ClientConn
	clock  *atomic.Int64 // ms since the Unix epoch
	srv    *Server
}

func (f *fixture) advance(d time.Duration) { f.clock.Add(d.Milliseconds()) }
func (f *fixture) now() time.Time          { return time.UnixMilli(f.clock.Load()) }

// start serves config (envoyproxy/ratelimit YAML) on a real socket with an in-process
// store on the fixture's clock, and dials it with go-control-plane's generated client.
func start(t testing.TB, config string, tune func(*Config)) *fixture {
	t.Helper()
	file, err := limits.Parse("test.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := limits.Build([]*limits.File{file}, false)
	if err != nil {
		t.Fatal(err)
	}
	clock := &atomic.Int64{}
	clock.Store(epoch.UnixMilli())
	cfg := Config{Decider: &counter.Local{Store: leaparray.NewStore(), Now: clock.Load},
		Rules: func() *limits.Rules { return rules }, Now: func() time.Time { return time.UnixMilli(clock.Load()) }}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Stop(context.Background()) })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fixture{client: rlspb.NewRateLimitServiceClient(conn), conn: conn, clock: clock, srv: srv}
}

// userTenAMinute limits each user to 10 requests a minute.
const userTenAMinute = `domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
`

func desc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (f *fixture) ask(t *testing.T, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// fixedConfig is envoyproxy/ratelimit's basic test config, each limit with buckets: 1
// (its fixed, epoch-aligned windows).
const fixedConfig = `domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5, buckets: 1}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10, buckets: 1}
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20, buckets: 1}
  - key: key2
    value: value2
    rate_limit: {unit: minute, requests_per_unit: 30, buckets: 1}
  - key: key2
    value: value3
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 8, buckets: 1}
  - key: key6
    rate_limit: {unlimited: true}
`

// ratelimitModel is how envoyproxy/ratelimit counts (its Redis cache): one counter per
// descriptor value and epoch-aligned window, the hits added first and the count
// compared with the limit after.
type ratelimitModel struct {
	counts map[string]uint64
}

func (m *ratelimitModel) status(rules *limits.Rules, domain string, d *commonpb.RateLimitDescriptor, hits uint64, now time.Time) *rlspb.RateLimitResponse_DescriptorStatus {
	var entries []limits.Entry
	key := domain
	for _, e := range d.Entries {
		entries = append(entries, limits.Entry{Key: e.Key, Value: e.Value})
		key += "_" + e.Key + "_" + e.Value
	}
	r, _ := rules.Lookup(domain, entries)
	switch {
	case r == nil:
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	case r.Unlimited:
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
	}
	l := r.Limits[0]
	sec := int64(l.Window / time.Second)
	start := now.Unix() / sec * sec
	k := fmt.Sprintf("%s_%d", key, start)
	m.counts[k] += hits
	st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK,
		CurrentLimit: &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: l.RequestsPerUnit, Unit: rlspb.RateLimitResponse_RateLimit_Unit(l.Unit), Name: l.Name}}
	if c := m.counts[k]; c > uint64(l.RequestsPerUnit) {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
	} else {
		st.LimitRemaining = l.RequestsPerUnit - uint32(c)
	}
	st.DurationUntilReset = &durationpb.Duration{Seconds: sec - now.Unix()%sec}
	return st
}

// With buckets: 1 every answer is envoyproxy/ratelimit's: a random stream of requests
// (several descriptors each, hits_addend at both levels, a clock crossing windows)
// gets, descriptor by descriptor, the codes, limits, remaining counts and reset times
// its model of Redis counting gives.
func TestFixedWindowsAnswerAsRatelimitDoes(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	f := start(t, fixedConfig, nil)
	rules := f.srv.cfg.Rules()
	model := &ratelimitModel{counts: map[string]uint64{}}
	pool := []*commonpb.RateLimitDescriptor{
		desc("key1", "value1", "subkey1", "a"), desc("key1", "value1", "subkey1", "subvalue1"),
		desc("key2", "x"), desc("key2", "y"), desc("key2", "value2"), desc("key2", "value3"),
		desc("key3", "z"), desc("key6", "u"), desc("nope", "n"), desc("key1", "value1"),
	}
	overall := 0
	for i := 0; i < 3000; i++ {
		f.advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		req := &rlspb.RateLimitRequest{Domain: "test-domain", HitsAddend: uint32(rng.IntN(3))}
		var hits []uint64
		for n := 1 + rng.IntN(3); n > 0; n-- {
			d := pool[rng.IntN(len(pool))]
			h := uint64(max(1, req.HitsAddend))
			if rng.IntN(4) == 0 {
				v := uint64(rng.IntN(5)) // 0: check only
				d = &commonpb.RateLimitDescriptor{Entries: d.Entries, HitsAddend: wrapperspb.UInt64(v)}
				h = v
			}
			req.Descriptors = append(req.Descriptors, d)
			hits = append(hits, h)
		}
		resp := f.ask(t, req)
		want := rlspb.RateLimitResponse_OK
		for j, d := range req.Descriptors {
			w := model.status(rules, "test-domain", d, hits[j], f.now())
			got := resp.Statuses[j]
			if got.Code != w.Code || got.LimitRemaining != w.LimitRemaining || got.CurrentLimit.GetRequestsPerUnit() != w.CurrentLimit.GetRequestsPerUnit() ||
				got.CurrentLimit.GetUnit() != w.CurrentLimit.GetUnit() || got.DurationUntilReset.GetSeconds() != w.DurationUntilReset.GetSeconds() {
				t.Fatalf("request %d descriptor %d %v (hits %d) at %v: got %v; envoyproxy/ratelimit answers %v", i, j, d.Entries, hits[j], f.now(), got, w)
			}
			if w.Code == rlspb.RateLimitResponse_OVER_LIMIT {
				want = w.Code
			}
		}
		if resp.OverallCode != want {
			t.Fatalf("request %d: overall %v; want %v", i, resp.OverallCode, want)
		}
		if want == rlspb.RateLimitResponse_OVER_LIMIT {
			overall++
		}
	}
	if overall == 0 {
		t.Fatal("no request went over a limit: the stream proves little")
	}
}

// By default a window slides (in DefaultBuckets steps): 10 hits late in one minute
// still count a few seconds into the next, where a fixed window would have begun
// again.
func TestWindowsSlideByDefault(t *testing.T) {
	f := start(t, userTenAMinute, nil)
	f.advance(50 * time.Second)
	req := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "u")}, HitsAddend: 10}
	if resp := f.ask(t, req); resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("10 hits of 10: %v; want OK with 0 remaining", resp)
	}
	f.advance(11 * time.Second) // a fixed minute would have begun again
	one := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "u")}}
	if resp := f.ask(t, one); resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("11 s later: %v; want OVER_LIMIT (the 10 are within the last minute)", resp)
	}
	if got := f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "other")}}); got.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("another user: %v; want OK (each value counts apart)", got)
	}
	f.advance(60 * time.Second)
	if resp := f.ask(t, one); resp.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("a minute later: %v; want OK", resp)
	}
}

// A hits_addend past what one counter op may add (2^31-1) counts as that much, whether
// the request or the descriptor carries it: the call is answered over its limit, not
// refused (a request-wide one was refused INVALID_ARGUMENT, a descriptor's was capped).
func TestHugeHitsAddendCountsAsTheMostOneOpAdds(t *testing.T) {
	f := start(t, userTenAMinute, nil)
	huge := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "a")}, HitsAddend: math.MaxUint32}
	resp := f.ask(t, huge)
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("request-wide hits_addend %d: %v; want OVER_LIMIT with 0 remaining", uint32(math.MaxUint32), resp)
	}
	d := desc("user", "b")
	d.HitsAddend = wrapperspb.UInt64(math.MaxUint64)
	if resp := f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{d}}); resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("descriptor hits_addend %d: %v; want OVER_LIMIT", uint64(math.MaxUint64), resp)
	}
}

// unlimited never counts, a descriptor that matches nothing has no limit, replaces
// drops the replaced rule, shadow_mode answers OK over the limit, and a limit override
// from Envoy counts as given.
func TestRuleKinds(t *testing.T) {
	f := start(t, `domain: d
descriptors:
  - key: vip
    rate_limit: {unlimited: true}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1, name: per_path}
  - key: special
    rate_limit: {unit: minute, requests_per_unit: 100, name: special, replaces: [{name: per_path}]}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`, nil)
	ask := func(ds ...*commonpb.RateLimitDescriptor) *rlspb.RateLimitResponse {
		return f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: ds})
	}
	for i := 0; i < 3; i++ {
		r := ask(desc("vip", "v"), desc("unknown", "x"))
		if r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != math.MaxUint32 ||
			r.Statuses[1].CurrentLimit != nil {
			t.Fatalf("unlimited and unmatched: %v; want OK, remaining max for the first, no limit for the second", r)
		}
	}
	ask(desc("path", "/a"))
	if r := ask(desc("path", "/a")); r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second hit of 1/minute: %v; want OVER_LIMIT", r)
	}
	if r := ask(desc("path", "/a"), desc("special", "s")); r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit != nil {
		t.Fatalf("with a rule replacing per_path: %v; want OK, the path's rule dropped", r)
	}
	for i := 0; i < 3; i++ {
		if r := ask(desc("shadow", "x")); r.OverallCode != rlspb.RateLimitResponse_OK {
			t.Fatalf("shadow mode, hit %d: %v; want OK", i+1, r)
		}
	}
	over := &commonpb.RateLimitDescriptor{Entries: desc("unknown", "o").Entries,
		Limit: &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: 3 /* HOUR */}}
	for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
		r := ask(over)
		if r.OverallCode != want || r.Statuses[0].CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_HOUR {
			t.Fatalf("override 2/hour, hit %d: %v; want %v per HOUR", i+1, r, want)
		}
	}
}

// Bad requests are refused with INVALID_ARGUMENT, a token is required where one is
// set (health checks go without), and a counter that cannot be decided answers
// UNAVAILABLE, never a made-up OK.
func TestRefusals(t *testing.T) {
	f := start(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n", func(c *Config) {
		c.Token = "s3cret"
		c.Decider = &counter.Local{Store: leaparray.NewStore(leaparray.WithBounds(leaparray.Bounds{MaxUnits: 1})), Now: func() int64 { return epoch.UnixMilli() }}
	})
	ctx := context.Background()
	code := func(ctx context.Context, req *rlspb.RateLimitRequest) codes.Code {
		_, err := f.client.ShouldRateLimit(ctx, req)
		return status.Code(err)
	}
	good := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("k", "1")}}
	if c := code(ctx, good); c != codes.Unauthenticated {
		t.Fatalf("no token: %v; want Unauthenticated", c)
	}
	if c := code(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope"), good); c != codes.Unauthenticated {
		t.Fatalf("wrong token: %v; want Unauthenticated", c)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if c := code(authed, good); c != codes.OK {
		t.Fatalf("right token: %v; want OK", c)
	}
	many := make([]*commonpb.RateLimitDescriptor, 65) // over MaxDescriptors' default, 64
	for i := range many {
		many[i] = desc("k", "1")
	}
	for _, bad := range []*rlspb.RateLimitRequest{{Descriptors: good.Descriptors}, {Domain: "d"},
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{{}}}, {Domain: "d", Descriptors: many},
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{{Entries: good.Descriptors[0].Entries, IsNegativeHits: true}}}} {
		if c := code(authed, bad); c != codes.InvalidArgument {
			t.Errorf("%v: %v; want InvalidArgument", bad, c)
		}
	}
	// The store holds one counter: a second cannot be decided.
	if c := code(authed, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("k", "2")}}); c != codes.Unavailable {
		t.Fatalf("a counter the store has no room for: %v; want Unavailable", c)
	}
	if f.srv.Undecided() == 0 {
		t.Fatal("the undecided call was not counted")
	}
	h, err := healthpb.NewHealthClient(f.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v, %v; want SERVING", h, err)
	}
}

// With denied_consumes_nothing a request that one descriptor denies counts in none of
// its others (envoyproxy/ratelimit#1060); without it, as there, it counts in all.
func TestDeniedRequestConsumesNothing(t *testing.T) {
	const rules = `descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	for _, c := range []struct {
		name      string
		config    string
		global    bool
		remaining uint32 // user's, after an allowed and a denied request and one more
	}{
		{"as envoyproxy/ratelimit", "domain: d\n" + rules, false, 0},
		{"per domain", "domain: d\ndenied_consumes_nothing: true\n" + rules, false, 1},
		{"global", "domain: d\n" + rules, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, c.config, func(cfg *Config) { cfg.DeniedConsumesNothing = c.global })
			both := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "a"), desc("ip", "x")}}
			if r := f.ask(t, both); r.OverallCode != rlspb.RateLimitResponse_OK {
				t.Fatalf("first: %v; want OK", r)
			}
			r := f.ask(t, both)
			if r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || r.Statuses[1].Code != rlspb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("second: %v; want OVER_LIMIT by ip", r)
			}
			r = f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "a")}})
			if r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != c.remaining {
				t.Fatalf("user alone after the denied request: %v; want OK with %d remaining", r, c.remaining)
			}
		})
	}
}

// A descriptor's hits_addend of 0, sent, checks without counting (as envoyproxy/ratelimit
// takes it), in both ways of counting: the count it is judged by stays as it was.
func TestHitsAddendZeroChecksOnly(t *testing.T) {
	for _, nothing := range []bool{false, true} {
		f := start(t, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
			func(cfg *Config) { cfg.DeniedConsumesNothing = nothing })
		check := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{
			{Entries: desc("user", "a").Entries, HitsAddend: wrapperspb.UInt64(0)}}}
		count := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "a")}, HitsAddend: 2}
		for _, step := range []struct {
			req       *rlspb.RateLimitRequest
			code      rlspb.RateLimitResponse_Code
			remaining uint32
		}{
			{check, rlspb.RateLimitResponse_OK, 2},
			{check, rlspb.RateLimitResponse_OK, 2},
			{count, rlspb.RateLimitResponse_OK, 0},
			{check, rlspb.RateLimitResponse_OK, 0}, // at the limit, not over it
		} {
			r := f.ask(t, step.req)
			if r.OverallCode != step.code || r.Statuses[0].LimitRemaining != step.remaining {
				t.Fatalf("denied consumes nothing %v: %v; want %v with %d remaining", nothing, r, step.code, step.remaining)
			}
		}
	}
}

// An allow the router answers by its fail policy (--fail-open) is no decision: with
// denied_consumes_nothing, whose counting uses allows, the call is UNAVAILABLE, not a
// made-up OK (the router, over a store with room for one counter, cannot admit a
// second).
func TestFailPolicyAnswerIsNotADecision(t *testing.T) {
	f := start(t, "domain: d\ndenied_consumes_nothing: true\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n", func(c *Config) {
		local := &counter.Local{Store: leaparray.NewStore(leaparray.WithBounds(leaparray.Bounds{MaxUnits: 1})), Now: func() int64 { return epoch.UnixMilli() }}
		r := route.New("n0", local, peerrpc.Forwarder{C: peerrpc.NewClient(rpc.Config{})}, counter.Limits{})
		r.SetRing(ring.New([]ring.Member{{Name: "n0", RPCAddr: "127.0.0.1:1"}}, ring.Config{}))
		r.FailOpen = true
		c.Decider = r
	})
	ask := func(v string) codes.Code {
		_, err := f.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("k", v)}})
		return status.Code(err)
	}
	if c := ask("1"); c != codes.OK {
		t.Fatalf("the first counter: %v; want OK", c)
	}
	if c := ask("2"); c != codes.Unavailable {
		t.Fatalf("a counter the store has no room for, fail-open: %v; want Unavailable", c)
	}
}

// Hits are counted per rule under its configured key (never a request's value), under
// the request's own keys and values for a detailed_metric rule (the first maxDetailed
// of them), under the values its flags name for a value_to_metric rule, and under
// domain "*", rule "override" for a limit override (its domain is the client's).
func TestHitsAreCountedPerRuleWithBoundedLabels(t *testing.T) {
	f := start(t, `domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 100}
`, nil)
	ask := func(ds ...*commonpb.RateLimitDescriptor) {
		f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: ds})
	}
	ask(desc("user", "a"))
	ask(desc("user", "b"))
	ask(desc("user", "b"))
	ask(desc("path", "/x"))
	ask(&commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "route", Value: "api"}, {Key: "method", Value: "GET"}}})
	over := &commonpb.RateLimitDescriptor{Entries: desc("any", "v").Entries, Limit: &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}}
	f.ask(t, &rlspb.RateLimitRequest{Domain: "client-chosen", Descriptors: []*commonpb.RateLimitDescriptor{over}})
	hits := f.srv.metrics.hits
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"d", "d.user", "total"}, 3},
		{[]string{"d", "d.user", "over_limit"}, 1},
		{[]string{"d", "d.user", "within_limit"}, 2},
		{[]string{"d", "d.path_/x", "total"}, 1},
		{[]string{"d", "d.route_api.method", "total"}, 1},
		{[]string{"*", "override", "total"}, 1},
	} {
		if got := testutil.ToFloat64(hits.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("hits %v = %v; want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(hits); n != 10 {
		t.Errorf("%d label sets; want 10 (d.user, d.path_/x, d.route_api.method and the override, each total and within_limit, and d.user over_limit: no request value but the detailed rule's, no client domain)", n)
	}
}

// Every call is counted by method and status code, and timed.
func TestCallsAreCountedByCode(t *testing.T) {
	f := start(t, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n", nil)
	f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "a")}})
	f.ask(t, &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "b")}})
	if _, err := f.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty request: %v; want InvalidArgument", err)
	}
	for code, want := range map[string]float64{"OK": 2, "InvalidArgument": 1} {
		if got := testutil.ToFloat64(f.srv.metrics.calls.WithLabelValues("ShouldRateLimit", code)); got != want {
			t.Errorf("calls with %s: %v; want %v", code, got, want)
		}
	}
	if n := testutil.CollectAndCount(f.srv.metrics.duration); n != 1 {
		t.Errorf("%d duration series; want 1 (ShouldRateLimit)", n)
	}
}

// A call compressed with gzip goes to grpc-go's server (h2grpc serves identity
// encoding alone) and is decided the same: the two paths count in the same counters.
func TestCompressedCallsAreDecidedTheSame(t *testing.T) {
	f := start(t, userTenAMinute, nil)
	req := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{desc("user", "u")}, HitsAddend: 6}
	if resp := f.ask(t, req); resp.OverallCode != rlspb.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("6 of 10, plain: %v; want OK with 4 remaining", resp)
	}
	resp, err := f.client.ShouldRateLimit(context.Background(), req, grpc.UseCompressor("gzip")) // registered by package rlsapi itself
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("12 of 10, gzip: %v; want OVER_LIMIT with 0 remaining", resp)
	}
}
