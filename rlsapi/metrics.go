package rlsapi

import (
	"context"
	"net/netip"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/peer"

	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/limits"
)

// metrics are envoyproxy/ratelimit's per-rule stats, labelled by domain and rule (the
// rule's configured key: bounded by the config, never by request values; a limit
// override from Envoy counts as rule "override").
type metrics struct {
	hits *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{hits: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leapcount_rls_hits_total",
		Help: "Hits counted by rate limit rule, by result: total, over_limit, near_limit (above 80% of the limit), within_limit, shadow_mode.",
	}, []string{"domain", "rule", "result"})}
	if reg != nil {
		if err := reg.Register(m.hits); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// note counts one descriptor's hits under its rule (overrides have no configured rule
// and are counted under "override").
func (m *metrics) note(domain string, r *limits.Rule, st *rlspb.RateLimitResponse_DescriptorStatus, hits int64) {
	key := r.Key
	if key == "" {
		key = "override"
	}
	h := float64(hits)
	count := func(result string) { m.hits.WithLabelValues(domain, key, result).Add(h) }
	count("total")
	limit := uint64(st.CurrentLimit.GetRequestsPerUnit())
	switch {
	case st.Code == rlspb.RateLimitResponse_OVER_LIMIT:
		count("over_limit")
		if r.ShadowMode {
			count("shadow_mode")
		}
	default:
		count("within_limit")
		if used := limit - uint64(st.LimitRemaining); used*5 > limit*4 {
			count("near_limit")
		}
	}
}

// peerSource is the address wrong guesses are counted by.
func peerSource(ctx context.Context) netip.Addr {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return authlimit.Source(p.Addr)
	}
	return netip.Addr{}
}
