//go:build chaos

package chaosdocker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/history"
)

// flushInterval is the nodes' write-behind interval (--flush-interval, its default):
// the span a crash or freeze may leave unwritten to Redis.
const flushInterval = 100 * time.Millisecond

// run is one scenario's load on a cluster: increments over 1,000 counters (10-minute
// windows) and allows under a limit over 4, through the published RESP ports of the
// nodes in `through`, with what README allows for the scenario's fault.
type run struct {
	t       *testing.T
	name    string
	c       *cluster
	incrs   *faultload.Gen
	allows  *faultload.Allows
	through []string // the nodes clients send through
	bounds  struct{ incr, allow history.Bounds }
	probes  probes
	began   time.Time
	faultAt time.Time // when around began the fault

	stopAllows context.CancelFunc
	allowsDone chan struct{}
}

// begin starts the load through every member.
func begin(t *testing.T, name string, c *cluster) *run {
	s := seed(t)
	r := &run{t: t, name: name, c: c, began: time.Now(), allowsDone: make(chan struct{})}
	r.incrs = faultload.New(faultload.Config{Keys: 1000, Workers: 8, Seed: s, Rate: 1500})
	r.allows = faultload.NewAllows(faultload.AllowConfig{Keys: 4, Limit: 1000, Workers: 2, Seed: s})
	t.Cleanup(func() { r.incrs.Close(); r.allows.Close() })
	r.send(c.members...)
	r.incrs.Start(10*time.Minute, 1<<40)
	ctx, cancel := context.WithCancel(context.Background())
	r.stopAllows = cancel
	go func() { defer close(r.allowsDone); r.allows.Run(ctx) }()
	return r
}

// hold lets the load run for d: a span of traffic, or how long a fault lasts; never a
// stand-in for waiting on a condition.
func (r *run) hold(d time.Duration) { time.Sleep(d) }

// send makes clients send through nodes from their next request on.
func (r *run) send(nodes ...string) {
	r.through = nodes
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = r.c.respAddr(n)
	}
	r.incrs.SetAddrs(addrs...)
	r.allows.SetAddrs(addrs...)
}

// drain takes node out of the clients' set and waits until the increments sent to it
// have their answers, as a load balancer does once a node's /readyz turns 503 or its
// health check fails.
func (r *run) drain(node string) {
	r.send(r.c.others(node)...)
	if err := r.incrs.WaitIdle(r.c.respAddr(node), 10*time.Second); err != nil {
		r.t.Fatal(err)
	}
}

// acks are what clients were acknowledged per key: increments, and admissions of allow
// keys.
type acks struct{ incr, allow map[string]int64 }

// acked is what clients have been acknowledged so far.
func (r *run) acked() acks {
	a := acks{incr: map[string]int64{}, allow: r.allows.Admitted()}
	c := r.incrs.Snapshot()
	for i, k := range c.Keys {
		a.incr[k] = c.Acked[i]
	}
	return a
}

// since is what was acknowledged after an earlier snapshot.
func (a acks) since(earlier acks) acks {
	for k, n := range earlier.incr {
		a.incr[k] -= n
	}
	for k, n := range earlier.allow {
		a.allow[k] -= n
	}
	return a
}

// only keeps the keys of keep.
func (a acks) only(keep map[string]bool) acks {
	for _, m := range []map[string]int64{a.incr, a.allow} {
		maps.DeleteFunc(m, func(k string, _ int64) bool { return !keep[k] })
	}
	return a
}

// around runs fault with the load going on and returns what was acknowledged from two
// flush intervals before it began to one after it ended: what an owner that crashed or
// froze then may not have written to Redis.
func (r *run) around(fault func()) acks {
	before := r.acked()
	r.hold(2 * flushInterval)
	r.faultAt = time.Now()
	fault()
	r.hold(flushInterval)
	return r.acked().since(before)
}

// finish stops the load, waits for the members to agree, and checks every counter
// through every member: increments within acked − allowed loss ≤ final ≤ acked +
// unknown, allow keys within their limit plus the allowed over-admission, every node
// answering the same counts. It returns the scenario's row.
func (r *run) finish() row {
	t := r.t
	st := r.incrs.Stop()
	r.stopAllows()
	<-r.allowsDone
	r.c.waitConverged(time.Now(), r.c.members...)
	tallies := r.incrs.Snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out row
	var first []int64
	for _, n := range r.c.members {
		counter := faultload.HTTPCounter{Addr: r.c.httpAddr(n), Client: r.c.http}
		counts, err := counter.Counts(ctx, tallies.Keys, r.incrs.Window())
		if err != nil {
			t.Fatalf("counts through %s: %v", n, err)
		}
		incr := incrLog(tallies).Check(finalCounts(tallies.Keys, counts), r.bounds.incr)
		allow, err := r.allows.Check(ctx, counter, r.bounds.allow)
		if err != nil {
			t.Fatalf("allow counts through %s: %v", n, err)
		}
		r.judge(n, incr, allow)
		r.checkProbes(ctx, n, counter)
		if first == nil {
			first, out = counts, r.row(st, incr, allow)
		} else if d, ex := faultload.Disagree(tallies.Keys, first, counts); d > 0 {
			t.Errorf("%s: %s disagrees with %s on %d counters, e.g. %v", r.name, n, r.c.members[0], d, ex)
		}
	}
	t.Logf("%s: incr %d acked, %d failed, %d unknown; errors seen: %q", r.name, st.Acked, st.Failed, st.Unknown, r.incrs.Errors())
	if from, last := r.incrs.LongestOutageSpan(); !from.IsZero() && !r.faultAt.IsZero() {
		t.Logf("%s: the longest outage (%v) began %v after the fault; its last failing request began %v after it", r.name,
			r.incrs.LongestOutage().Round(time.Millisecond), from.Sub(r.faultAt).Round(time.Millisecond), last.Sub(r.faultAt).Round(time.Millisecond))
	}
	t.Logf("%s: the slowest answer that succeeded took %v", r.name, r.incrs.SlowestAnswer().Round(time.Millisecond))
	if o := r.incrs.LongestUnanswered(); o > maxOutage {
		t.Errorf("%s: a counter went unanswered for %v; want at most %v", r.name, o, maxOutage)
	}
	out.check = "ok"
	if t.Failed() {
		out.check = "FAIL"
	}
	return out
}

// maxOutage bounds how long any counter may keep failing in any scenario: twice what
// README gives for detection and a lease, so a hang is caught and a loaded host is not.
const maxOutage = 16 * time.Second

// judge fails the test for every violation of the checker's rule.
func (r *run) judge(node string, incr, allow history.Summary) {
	if len(incr.Violations) > 0 {
		r.t.Errorf("%s, counts through %s: %v: %q", r.name, node, incr, incr.Violations)
	}
	if len(allow.Violations) > 0 {
		r.t.Errorf("%s, allow counts through %s: %v: %q", r.name, node, allow, allow.Violations)
	}
}

// incrLog is the history of the increments the generator sent.
func incrLog(c faultload.Counts) *history.Log {
	var l history.Log
	for i, k := range c.Keys {
		l.Incr(k, c.Acked[i], history.OK)
		l.Incr(k, c.Failed[i], history.Failed)
		l.Incr(k, c.Unknown[i], history.Unknown)
	}
	return &l
}

func finalCounts(keys []string, counts []int64) map[string]int64 {
	m := make(map[string]int64, len(keys))
	for i, k := range keys {
		m[k] = counts[i]
	}
	return m
}

// row sums the scenario up: increments and allows together for the ops.
func (r *run) row(st faultload.Stats, incr, allow history.Summary) row {
	a := r.allows.Stats()
	return row{scenario: r.name, ops: st.Sent + a.Sent, acked: st.Acked + a.Acked, failed: st.Failed + a.Failed,
		unknown: st.Unknown + a.Unknown, final: incr.Final, lost: incr.Lost + allow.Lost, overAdmitted: allow.OverAdmitted,
		outage: r.incrs.LongestUnanswered(), took: time.Since(r.began)}
}

// row is one line of the suite's table.
type row struct {
	scenario, check                                        string
	ops, acked, failed, unknown, final, lost, overAdmitted int64
	outage, took                                           time.Duration
}

func table(rows []row) string {
	s := fmt.Sprintf("| %-10s | %6s | %6s | %6s | %7s | %6s | %4s | %13s | %26s | %5s | %5s |\n", "scenario", "ops", "acked",
		"failed", "unknown", "final", "lost", "over-admitted", "longest unavailability ms", "took", "check")
	s += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
	for _, r := range rows {
		s += fmt.Sprintf("| %-10s | %6d | %6d | %6d | %7d | %6d | %4d | %13d | %26d | %4.0fs | %5s |\n", r.scenario, r.ops, r.acked,
			r.failed, r.unknown, r.final, r.lost, r.overAdmitted, r.outage.Milliseconds(), r.took.Seconds(), r.check)
	}
	return s
}
