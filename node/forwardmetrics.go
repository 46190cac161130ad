package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// forwardDuration is leapcount_forward_duration_seconds: how long each op call to an
// owner took, from its start to its outcome (rpc.Config.OpDone).
func newForwardDuration(reg prometheus.Registerer) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "leapcount_forward_duration_seconds",
		Help:    "Time from forwarding a batch of ops to their owner to its outcome (answered, failed or timed out).",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	reg.MustRegister(h)
	return h
}

// peerLoadCollector reads, at each scrape, the frames each peer's connection carries:
// leapcount_forward_frames_in_flight and leapcount_forward_calls_queued, by peer
// member name (bounded by membership; a peer not yet named by gossip is "unknown").
type peerLoadCollector struct {
	n                *Node
	inFlight, queued *prometheus.Desc
}

func newPeerLoadCollector(n *Node) *peerLoadCollector {
	return &peerLoadCollector{n: n,
		inFlight: prometheus.NewDesc("leapcount_forward_frames_in_flight", "Op frames sent to a peer and not yet answered, by peer.", []string{"peer"}, nil),
		queued:   prometheus.NewDesc("leapcount_forward_calls_queued", "Calls waiting for the writer to a peer, by peer.", []string{"peer"}, nil),
	}
}

func (c *peerLoadCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.inFlight; ch <- c.queued }

func (c *peerLoadCollector) Collect(ch chan<- prometheus.Metric) {
	names := map[string]string{}
	for _, m := range c.n.memberView() {
		if m.RPC != "" {
			names[m.RPC] = m.Name
		}
	}
	seen := map[string]bool{}
	for _, l := range c.n.rpcClient.Load() {
		name := names[l.Addr]
		if name == "" {
			name = "unknown"
		}
		if seen[name] {
			continue // two addresses of one member (it moved): the first stands
		}
		seen[name] = true
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(l.InFlight), name)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(l.Queued), name)
	}
}
