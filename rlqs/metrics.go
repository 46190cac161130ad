package rlqs

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	streams     prometheus.Gauge
	buckets     prometheus.Gauge
	assignments *prometheus.CounterVec
	reserved    prometheus.Counter
	stalled     prometheus.Counter
	localShares prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leapcount_rlqs_streams",
			Help: "RLQS streams (StreamRateLimitQuotas) open on this node."}),
		buckets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leapcount_rlqs_buckets",
			Help: "Buckets reported on this node's RLQS streams (a bucket on two streams counts twice)."}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leapcount_rlqs_assignments_total",
			Help: "Bucket actions sent, by kind: token_bucket (a new one), renewed (the same one, its time to live renewed), allow_all, deny_all, abandon; withheld counts reports whose renewal did not fit the limit (the assignment in force runs out)."},
			[]string{"kind"}),
		reserved: prometheus.NewCounter(prometheus.CounterOpts{Name: "leapcount_rlqs_reserved_total",
			Help: "Admissions reserved in the limits' counters for RLQS assignments (what they may admit)."}),
		stalled: prometheus.NewCounter(prometheus.CounterOpts{Name: "leapcount_rlqs_stalled_streams_total",
			Help: "RLQS streams ended because their client read no answer within the send timeout."}),
		localShares: prometheus.NewCounter(prometheus.CounterOpts{Name: "leapcount_rlqs_local_shares_total",
			Help: "RLQS fair shares computed among this node's streams alone, because the bucket's owner could not be asked (unreachable, or a release without RLQS)."}),
	}
	for _, k := range []string{kindTokenBucket, kindRenewed, kindAllowAll, kindDenyAll, kindAbandon, kindWithheld} {
		m.assignments.WithLabelValues(k)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.streams, m.buckets, m.assignments, m.reserved, m.stalled, m.localShares} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

const (
	kindTokenBucket = "token_bucket"
	kindRenewed     = "renewed"
	kindAllowAll    = "allow_all"
	kindDenyAll     = "deny_all"
	kindAbandon     = "abandon"
	kindWithheld    = "withheld"
)
