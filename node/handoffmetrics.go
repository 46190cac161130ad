package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/owner"
)

// handoffMetrics count the Handoffs this node sends and receives: how many, how many
// counters they moved, and how long a send took to be answered. A failed send is sent
// again by the owner, so failures count the retries.
type handoffMetrics struct {
	sent     *prometheus.CounterVec // by result: ok, failed
	received prometheus.Counter
	counters *prometheus.CounterVec // by direction: sent, received
	bytes    *prometheus.CounterVec // by direction: the counters' bytes in the frames
	duration prometheus.Histogram
}

func newHandoffMetrics(reg prometheus.Registerer) *handoffMetrics {
	m := &handoffMetrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leapcount_handoffs_sent_total",
			Help: "Handoffs (a partition's counters moving to their new owner) this node sent, by result: ok, failed (sent again).",
		}, []string{"result"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leapcount_handoffs_received_total",
			Help: "Handoffs this node received and applied.",
		}),
		counters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leapcount_handoff_counters_total",
			Help: "Counters moved in Handoffs, by direction: sent (answered ok), received.",
		}, []string{"direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leapcount_handoff_bytes_total",
			Help: "Bytes of the counters moved in Handoffs (their encoding in the frames), by direction: sent (answered ok), received.",
		}, []string{"direction"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leapcount_handoff_duration_seconds",
			Help:    "Time from sending a Handoff to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
	}
	reg.MustRegister(m.sent, m.received, m.counters, m.bytes, m.duration)
	for _, r := range []string{"ok", "failed"} {
		m.sent.WithLabelValues(r) // every series from the start, at 0
	}
	for _, d := range []string{"sent", "received"} {
		m.counters.WithLabelValues(d)
		m.bytes.WithLabelValues(d)
	}
	return m
}

// countingPeers is the owner's Peers, counted.
type countingPeers struct {
	owner.Peers
	m *handoffMetrics
}

func (c countingPeers) Handoff(addr string, h *owner.Handoff, done func(error)) {
	start, n, size := time.Now(), len(h.Counters), countersSize(h)
	c.Peers.Handoff(addr, h, func(err error) {
		c.m.duration.Observe(time.Since(start).Seconds())
		if err != nil {
			c.m.sent.WithLabelValues("failed").Inc()
		} else {
			c.m.sent.WithLabelValues("ok").Inc()
			c.m.counters.WithLabelValues("sent").Add(float64(n))
			c.m.bytes.WithLabelValues("sent").Add(float64(size))
		}
		done(err)
	})
}

// countingReceiver is the owner as the rpc server's Handoff handler, counted.
type countingReceiver struct {
	owner.Receiver
	m *handoffMetrics
}

func (c countingReceiver) Handoff(ctx context.Context, h *owner.Handoff) error {
	err := c.Receiver.Handoff(ctx, h)
	if err == nil {
		c.m.received.Inc()
		c.m.counters.WithLabelValues("received").Add(float64(len(h.Counters)))
		c.m.bytes.WithLabelValues("received").Add(float64(countersSize(h)))
	}
	return err
}

// countersSize is the bytes h's counters take in its frame.
func countersSize(h *owner.Handoff) int {
	n := 0
	for i := range h.Counters {
		n += owner.HandoffSize(&h.Counters[i])
	}
	return n
}
