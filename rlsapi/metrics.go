package rlsapi

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/limits"
)

// metrics are envoyproxy/ratelimit's per-rule stats, labelled by domain and rule: the
// rule's configured key, bounded by the config. A rule with detailed_metric is labelled
// by the request's own keys and values instead, and one under value_to_metric by the
// values its flags name (limits.Rules.MetricKey), as envoyproxy/ratelimit names them,
// for the first maxDetailed such labels; later ones count under the configured key. A limit
// override from Envoy counts as domain "*", rule "override": its domain is the client's.
type metrics struct {
	hits     *prometheus.CounterVec
	calls    *prometheus.CounterVec   // by method and gRPC code
	duration *prometheus.HistogramVec // by method

	methods sync.Map // full method name -> *methodMetrics

	mu       sync.Mutex
	detailed map[string]bool // labels from requests' values in use

	rulesMu sync.RWMutex
	rules   map[ruleLabel]*ruleCounters // the hits series of each (domain, rule) seen
}

// ruleLabel is a rule's labels in leapcount_rls_hits_total.
type ruleLabel struct{ domain, rule string }

// maxDetailed bounds the labels from requests' values of a node.
const maxDetailed = 1000

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{hits: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leapcount_rls_hits_total",
		Help: "Hits counted by rate limit rule, by result: total, over_limit, near_limit (above 80% of the limit), within_limit, shadow_mode.",
	}, []string{"domain", "rule", "result"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leapcount_grpc_requests_total",
			Help: "gRPC calls answered, by method and status code (UNAVAILABLE: not decided).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leapcount_grpc_request_duration_seconds",
			Help:    "Time to answer a gRPC call, by method.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method"}),
	}
	if reg != nil {
		for i, c := range []prometheus.Collector{m.hits, m.calls, m.duration} {
			if err := reg.Register(c); err != nil {
				for _, done := range []prometheus.Collector{m.hits, m.calls}[:i] {
					reg.Unregister(done) // all or nothing, so a retry can succeed
				}
				return nil, err
			}
		}
	}
	return m, nil
}

// observe counts each call by method and code, and times it. Only registered methods
// reach an interceptor, so the method label is bounded by the services served.
func (m *metrics) observe(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := next(ctx, req)
	mm := m.method(info.FullMethod)
	mm.duration.Observe(time.Since(start).Seconds())
	m.code(mm, status.Code(err)).Inc()
	return resp, err
}

// methodMetrics are one method's series, looked up once: resolving labels costs a
// hash of them on every call.
type methodMetrics struct {
	name     string
	duration prometheus.Observer
	codes    [17]atomic.Pointer[counterRef] // by codes.Code (OK to Unauthenticated), made on first use
}

type counterRef struct{ prometheus.Counter }

// code is mm's counter of calls that ended with c; a series is made only for the codes
// that occur.
func (m *metrics) code(mm *methodMetrics, c codes.Code) prometheus.Counter {
	if int(c) >= len(mm.codes) {
		return m.calls.WithLabelValues(mm.name, c.String())
	}
	if r := mm.codes[c].Load(); r != nil {
		return r.Counter
	}
	r := &counterRef{m.calls.WithLabelValues(mm.name, c.String())}
	mm.codes[c].Store(r) // two racing stores hold the same series
	return r.Counter
}

func (m *metrics) method(full string) *methodMetrics {
	if mm, ok := m.methods.Load(full); ok {
		return mm.(*methodMetrics)
	}
	mm := &methodMetrics{name: full[strings.LastIndexByte(full, '/')+1:]}
	mm.duration = m.duration.WithLabelValues(mm.name)
	actual, _ := m.methods.LoadOrStore(full, mm)
	return actual.(*methodMetrics)
}

// ruleCounters are one rule's hits series, by result, each made on first use (a series
// only for the results that occur); resolving labels costs a hash of them on every
// descriptor (BenchmarkDecide).
type ruleCounters struct {
	label   ruleLabel
	results [numResults]atomic.Pointer[counterRef]
}

// The results of leapcount_rls_hits_total.
const (
	resultTotal = iota
	resultOverLimit
	resultNearLimit
	resultWithinLimit
	resultShadowMode
	numResults
)

var resultNames = [numResults]string{"total", "over_limit", "near_limit", "within_limit", "shadow_mode"}

// note counts one descriptor's hits under its rule.
func (m *metrics) note(domain string, c *check, st *rlspb.RateLimitResponse_DescriptorStatus) {
	r := c.rule
	key := r.Key
	switch {
	case key == "":
		domain, key = "*", "override"
	case r.DetailedMetric:
		key = m.capped(detailedKey(domain, c.entries), key)
	case c.metric != "":
		key = m.capped(c.metric, key)
	}
	h := float64(c.hits)
	rc := m.ruleCounters(ruleLabel{domain, key})
	m.count(rc, resultTotal, h)
	limit := uint64(st.CurrentLimit.GetRequestsPerUnit())
	switch {
	case st.Code == rlspb.RateLimitResponse_OVER_LIMIT:
		m.count(rc, resultOverLimit, h)
		if r.ShadowMode {
			m.count(rc, resultShadowMode, h)
		}
	default:
		m.count(rc, resultWithinLimit, h)
		if used := limit - uint64(st.LimitRemaining); used*5 > limit*4 {
			m.count(rc, resultNearLimit, h)
		}
	}
}

func (m *metrics) count(rc *ruleCounters, result int, h float64) {
	r := rc.results[result].Load()
	if r == nil {
		r = &counterRef{m.hits.WithLabelValues(rc.label.domain, rc.label.rule, resultNames[result])}
		rc.results[result].Store(r) // two racing stores hold the same series
	}
	r.Add(h)
}

// ruleCounters are l's series. They are as many as the labels, which the config and
// maxDetailed bound.
func (m *metrics) ruleCounters(l ruleLabel) *ruleCounters {
	m.rulesMu.RLock()
	rc := m.rules[l]
	m.rulesMu.RUnlock()
	if rc != nil {
		return rc
	}
	m.rulesMu.Lock()
	defer m.rulesMu.Unlock()
	if rc = m.rules[l]; rc == nil {
		if m.rules == nil {
			m.rules = map[ruleLabel]*ruleCounters{}
		}
		rc = &ruleCounters{label: l}
		m.rules[l] = rc
	}
	return rc
}

// peerSource is the address wrong guesses are counted by.
func peerSource(ctx context.Context) netip.Addr {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return authlimit.Source(p.Addr)
	}
	return netip.Addr{}
}

// detailedKey is envoyproxy/ratelimit's detailed stats name of a request's descriptor
// (domain.key_value.key_value...).
func detailedKey(domain string, entries []limits.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		b.WriteByte('_')
		b.WriteString(e.Value)
	}
	return b.String()
}

// capped is label k, or fallback once maxDetailed labels from values are in use.
func (m *metrics) capped(k, fallback string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.detailed == nil {
		m.detailed = map[string]bool{}
	}
	if !m.detailed[k] {
		if len(m.detailed) >= maxDetailed {
			return fallback
		}
		m.detailed[k] = true
	}
	return k
}
