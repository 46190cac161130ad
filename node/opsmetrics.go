package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/owner"
)

// opsCollector reads, at each scrape, the gauges an operator watches that live in the
// node's parts: partitions by state, those decided, members by state, counters not yet
// written to Redis, and whether Redis answers. Reading them at the scrape costs the op
// path nothing.
type opsCollector struct {
	n                            *Node
	partitions, decided, members *prometheus.Desc
	undecided                    *prometheus.Desc
	unwritten, redisUp           *prometheus.Desc
	replicasBehind               *prometheus.Desc
	oldest, failedBatches        *prometheus.Desc
	inDoubt                      *prometheus.Desc
}

func newOpsCollector(n *Node) *opsCollector {
	return &opsCollector{n: n,
		partitions:     prometheus.NewDesc("leapcount_partitions", "This node's partitions by state (owner.State: owned, stale, releasing, lent, lent-stale, releasing-stale; idle: not this node's).", []string{"state"}, nil),
		decided:        prometheus.NewDesc("leapcount_partitions_decided", "Partitions this node decides now: its own in the ring, and under its lease.", nil, nil),
		undecided:      prometheus.NewDesc("leapcount_partitions_undecided", "Partitions the ring gives this node that it does not decide yet: their lease or their counters are awaited.", nil, nil),
		members:        prometheus.NewDesc("leapcount_members", "Cluster members as this node sees them, by state (alive, leaving, left, dead).", []string{"state"}, nil),
		unwritten:      prometheus.NewDesc("leapcount_writebehind_unwritten_counters", "Counters with deltas this node has not yet written to Redis (write-behind).", nil, nil),
		oldest:         prometheus.NewDesc("leapcount_writebehind_oldest_unconfirmed_seconds", "Age of the oldest write-behind batch made and not yet confirmed by Redis (0: none waits); absent without --redis.", nil, nil),
		failedBatches:  prometheus.NewDesc("leapcount_writebehind_flushes_failed_total", "Write-behind flushes that failed (Redis unreachable, or a batch not confirmed): their batches go again; absent without --redis.", nil, nil),
		inDoubt:        prometheus.NewDesc("leapcount_writebehind_in_doubt", "1 while a write-behind call of this node was sent and not answered at the last flush's end: it may still apply, only this node sends it again, and a node leaving waits for it (up to --shutdown-timeout); absent without --redis.", nil, nil),
		redisUp:        prometheus.NewDesc("leapcount_redis_up", "1 while Redis answers (its breaker closed) and, with --redis-wait-replicas, enough replicas acknowledge writes; 0 otherwise; absent without --redis.", nil, nil),
		replicasBehind: prometheus.NewDesc("leapcount_redis_replicas_behind", "1 while fewer replicas than --redis-wait-replicas acknowledge this node's writes (Redis then counts as down), else 0 (always 0 without that flag); absent without --redis.", nil, nil),
	}
}

func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.partitions, c.decided, c.undecided, c.members, c.unwritten, c.redisUp, c.replicasBehind, c.oldest, c.failedBatches, c.inDoubt} {
		ch <- d
	}
}

func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	states := c.n.owner.States()
	for s := owner.Idle; s <= owner.ReleasingStale; s++ {
		ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(states[s]), s.String())
	}
	owned, held := c.n.owner.Holding()
	ch <- prometheus.MustNewConstMetric(c.decided, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.undecided, prometheus.GaugeValue, float64(owned-held))
	byState := map[string]int{"alive": 0, "leaving": 0, "left": 0, "dead": 0}
	for _, m := range c.n.memberView() {
		byState[m.State]++
	}
	for st, k := range byState {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(k), st)
	}
	// Those in batches and queued, and those still waiting in the store for their part
	// of a flush (owner.Config.FlushBatch).
	ch <- prometheus.MustNewConstMetric(c.unwritten, prometheus.GaugeValue, float64(c.n.owner.Unwritten()+c.n.store.PendingCounters()))
	if c.n.redis != nil {
		up := 0.0
		if c.n.redis.Healthy() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.redisUp, prometheus.GaugeValue, up)
		ch <- prometheus.MustNewConstMetric(c.replicasBehind, prometheus.GaugeValue, b2f(c.n.redis.ReplicasBehind()))
		oldest, failed := c.n.owner.WriteBehindStats()
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
		ch <- prometheus.MustNewConstMetric(c.failedBatches, prometheus.CounterValue, float64(failed))
		ch <- prometheus.MustNewConstMetric(c.inDoubt, prometheus.GaugeValue, b2f(c.n.owner.InDoubt()))
	}
}

// newMemberChanges is leapcount_member_changes_total: each change of a member's state as
// this node saw it (the same events as the "member <state>" log lines), by new state.
func newMemberChanges(reg prometheus.Registerer) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leapcount_member_changes_total",
		Help: "Changes of a member's state as this node saw them, by the new state (alive, leaving, left, dead).",
	}, []string{"state"})
	reg.MustRegister(v)
	for _, st := range []string{"alive", "leaving", "left", "dead"} {
		v.WithLabelValues(st)
	}
	return v
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
