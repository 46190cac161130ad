package node

import (
	"github.com/leapcount/leapcount/internal/buildinfo"
	"github.com/leapcount/leapcount/internal/connlimit"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"slices"
)

// registerMetrics registers the node-wide metrics; the front ends register their own.
// Each node has its own registry so that several nodes can run in one test process.
func (n *Node) registerMetrics() {
	n.reg.MustRegister(newGCPauseCollectors()...)
	n.reg.MustRegister(n.sliceMetrics()...)
	n.reg.MustRegister(buildInfoMetric(), newOpsCollector(n), newPeerLoadCollector(n), newClockCollector(n),

		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_counters", Help: "Counters held in memory by this node.",
		}, func() float64 { return float64(n.store.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_store_units", Help: "Counter units held (a counter of more than 16 buckets is one per 16), against --max-counters.",
		}, func() float64 { return float64(n.store.Used()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_store_units_max", Help: "--max-counters: counter units beyond which new counters are refused.",
		}, func() float64 { return float64(n.cfg.MaxCounters) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_store_bytes", Help: "Memory the counters hold (slabs, pending deltas).",
		}, func() float64 { return float64(n.store.Bytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_store_mapped_bytes", Help: "Memory the counters' slabs hold mapped outside the Go heap (part of leapcount_store_bytes).",
		}, func() float64 { return float64(leaparray.MappedBytes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_partition_unknown_transitions_total", Help: "Events the partition state machine did not expect in a partition's state: each a flaw, logged, the state kept.",
		}, func() float64 { return float64(n.owner.UnknownTransitions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_forward_frames_total", Help: "Request frames sent to peers.",
		}, func() float64 { return float64(n.RPCStats().Frames) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_forward_ops_total", Help: "Operations forwarded to their owners.",
		}, func() float64 { return float64(n.RPCStats().Ops) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_rpc_refused_total", Help: "Connections to the rpc port refused by the peer handshake (not members, or garbage).",
		}, func() float64 { return float64(n.rpcSrv.Refused()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_redis_loads_total", Help: "Counters not in memory loaded from Redis before their first op.",
		}, func() float64 { l, _ := n.owner.Loads(); return float64(l) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_redis_loads_skipped_total", Help: "Counters not in memory created without a load: this node had decided their partition for longer than their window, so Redis held nothing of them.",
		}, func() float64 { _, s := n.owner.Loads(); return float64(s) }),
		decisions("allowed", func() uint64 { a, _ := n.decisions.Counts(); return a }),
		decisions("denied", func() uint64 { _, d := n.decisions.Counts(); return d }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_lease_grants_total", Help: "Partition leases this node granted to its peers' heartbeats (renewals included).",
		}, func() float64 { return float64(n.keeper.Stats().Granted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_lease_heartbeats_failed_total", Help: "Heartbeats (lease requests and renewals) this node sent that got no reply in time.",
		}, func() float64 { return float64(n.keeper.Stats().HeartbeatsFailed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_lease_heartbeats_sent_total", Help: "Heartbeats this node sent: to the voters (to every member while it hears no majority of them).",
		}, func() float64 { return float64(n.keeper.Stats().HeartbeatsSent) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_lease_heartbeats_answered_total", Help: "Peers' heartbeats this node answered: a voter answers every member's, a member that is not a voter almost none.",
		}, func() float64 { return float64(n.keeper.Stats().HeartbeatsHeard) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leapcount_lease_voter", Help: "1 while this node is one of the voters (which grant leases), else 0.",
		}, func() float64 {
			if slices.Contains(n.keeper.Voters(), n.cfg.Name) {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_lease_lapses_total", Help: "Partitions whose lease ran out while this node held them: it stopped deciding them until granted again.",
		}, func() float64 { return float64(n.keeper.Stats().Lapsed) }),
		failPolicyAnswers("open", func() uint64 { o, _ := n.router.FailPolicyAnswers(); return o }),
		failPolicyAnswers("closed", func() uint64 { _, c := n.router.FailPolicyAnswers(); return c }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_ring_builds_total", Help: "Rings built from membership (each change builds one).",
		}, func() float64 { return float64(n.RingBuilds()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_http_connections_refused_total", Help: "HTTP connections refused for being over --max-clients.",
		}, func() float64 {
			var refused int64
			for _, ln := range []*connlimit.Listener{n.httpLn, n.httpTLSLn} {
				if ln != nil {
					refused += ln.Refused()
				}
			}
			return float64(refused)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "leapcount_auth_refused_total",
			Help: "Wrong token guesses (RESP AUTH, HTTP and gRPC bearer) answered \"too many\": their source had used up its budget of wrong guesses.",
		}, func() float64 { return float64(n.authLimiter.Refused()) }),
	)
}

// failPolicyAnswers is leapcount_fail_policy_answers_total for one policy: allows the
// router answered by the fail policy, not by a decision, so that a dashboard sees how
// many answers were not decisions.
func failPolicyAnswers(policy string, n func() uint64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "leapcount_fail_policy_answers_total",
		Help:        "Allow ops answered by the fail policy (open: allowed, closed: denied) because no decision came back: their owner was unavailable or full, or its answer was lost.",
		ConstLabels: prometheus.Labels{"policy": policy},
	}, func() float64 { return float64(n()) })
}

// buildInfoMetric is leapcount_build_info: 1, labelled with what this binary is, so
// that a query sees which versions run where.
func buildInfoMetric() prometheus.Collector {
	bi := buildinfo.Read()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "leapcount_build_info",
		Help:        "Always 1; its labels say which leapcount this node runs: version, commit and the Go that built it.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.ShortCommit(), "goversion": bi.GoVersion},
	}, func() float64 { return 1 })
}

// decisions is leapcount_decisions_total for one result: the allow ops decided on this
// node, as their owner (an answer of the fail policy is not one: see
// leapcount_fail_policy_answers_total).
func decisions(result string, n func() uint64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "leapcount_decisions_total",
		Help:        "Allow ops decided on this node as their owner, by result: allowed, denied.",
		ConstLabels: prometheus.Labels{"result": result},
	}, func() float64 { return float64(n()) })
}
