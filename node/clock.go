package node

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/internal/ntp"
	"github.com/leapcount/leapcount/owner"
)

// The counters' clock (Config.Now) places every op in its bucket, on this node and in
// what it writes to Redis: each node measures it against Redis's (owner.RedisClock)
// and its peers' (lease.Keeper.ClockOffsets), and says so when they disagree by more
// than half the load skip's margin (owner.ClockMargin): in GET /v1/cluster's "clock",
// as a status problem, and in leapcount_clock_offset_seconds.

// ClockView is what this node measured of the other clocks against its counters' clock.
type ClockView struct {
	// Redis is Redis's clock (nil: no --redis, or not measured lately). RedisUnknown:
	// Redis answers and yet its clock could not be measured for 10 s.
	Redis        *OffsetView `json:"redis,omitempty"`
	RedisUnknown bool        `json:"redis_unknown,omitempty"`
	// Peers are the members' counters' clocks, measured on lease heartbeats, by name.
	Peers map[string]OffsetView `json:"peers"`
}

// OffsetView is another clock against this node's counters' clock: how far ahead it is
// (negative: behind), give or take err.
type OffsetView struct {
	OffsetMs int64 `json:"offset_ms"`
	ErrMs    int64 `json:"err_ms"`
}

func offsetView(e ntp.Estimate) OffsetView {
	return OffsetView{OffsetMs: e.Offset.Milliseconds(), ErrMs: e.Err.Milliseconds()}
}

// clockView reads the clocks' offsets.
func (n *Node) clockView() ClockView {
	v := ClockView{Peers: map[string]OffsetView{}}
	if e, known, overdue := n.owner.RedisClock(); known {
		ov := offsetView(e)
		v.Redis = &ov
	} else {
		v.RedisUnknown = overdue
	}
	for name, e := range n.keeper.ClockOffsets() {
		v.Peers[name] = offsetView(e)
	}
	return v
}

// clockProblem is the offset past which a clock's disagreement is a problem: half the
// margin past which a node stops skipping loads.
const clockProblem = owner.ClockMargin / 2

// problems lists the clocks that disagree with self's counters' clock past
// clockProblem, and a Redis clock that cannot be measured.
func (v ClockView) problems(self string) []string {
	var out []string
	if v.RedisUnknown {
		out = append(out, fmt.Sprintf("%s cannot measure its counters' clock against Redis's (TIME): it loads every counter not in memory from Redis", self))
	}
	if v.Redis != nil && tooFar(v.Redis.OffsetMs) {
		out = append(out, fmt.Sprintf("%s's counters' clock is %s Redis's (past %v; past %v it loads every counter not in memory from Redis): set its clock right",
			self, aheadOrBehind(-v.Redis.OffsetMs), clockProblem, owner.ClockMargin))
	}
	for _, name := range slices.Sorted(maps.Keys(v.Peers)) {
		if o := v.Peers[name].OffsetMs; tooFar(o) {
			out = append(out, fmt.Sprintf("member %s's counters' clock is %s %s's (past %v)", name, aheadOrBehind(o), self, clockProblem))
		}
	}
	return out
}

func tooFar(offsetMs int64) bool {
	return offsetMs > clockProblem.Milliseconds() || -offsetMs > clockProblem.Milliseconds()
}

// aheadOrBehind says how far a clock offsetMs ahead is ahead or behind.
func aheadOrBehind(offsetMs int64) string {
	d := (time.Duration(offsetMs) * time.Millisecond).Round(100 * time.Millisecond)
	if d < 0 {
		return fmt.Sprintf("%v behind", -d)
	}
	return fmt.Sprintf("%v ahead of", d)
}

// clockCollector is leapcount_clock_offset_seconds: each clock this node measured
// lately against its counters' clock, by what it is (against="redis", or a member's
// name: bounded by membership), read at each scrape. A clock not measured lately has
// no series.
type clockCollector struct {
	n    *Node
	desc *prometheus.Desc
}

func newClockCollector(n *Node) *clockCollector {
	return &clockCollector{n: n, desc: prometheus.NewDesc("leapcount_clock_offset_seconds",
		"How far another clock is ahead of this node's counters' clock (negative: behind): Redis's TIME (against=\"redis\") or a member's counters' clock (against=its name), measured NTP-style within the last 10 s.",
		[]string{"against"}, nil)}
}

func (c *clockCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clockCollector) Collect(ch chan<- prometheus.Metric) {
	if e, known, _ := c.n.owner.RedisClock(); known {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, e.Offset.Seconds(), "redis")
	}
	for name, e := range c.n.keeper.ClockOffsets() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, e.Offset.Seconds(), name)
	}
}
