package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/ownerprobe"
)

// Result is what one run found.
type Result struct {
	Options
	Ops        opStats
	Faults     int
	Handoffs   int
	Slices     sliceStats
	Steps      int           // events run
	SimTime    time.Duration // simulated time at the end
	Violations []string
	Trace      []string
}

// Failed reports whether the run broke a rule.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Report is a failed run's story: what broke, the faults and moves that led there, and
// how to replay it.
func (r Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (redis %v): %d ops (%d ok, %d failed, %d unknown, %d fail-policy), %d faults\n",
		r.Seed, r.Redis, r.Ops.ops, r.Ops.ok, r.Ops.failed, r.Ops.unknown, r.Ops.policy, r.Faults)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	b.WriteString("trace:\n")
	for _, l := range r.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "replay: %s\n", r.Replay())
	return b.String()
}

// Replay is the command that runs this seed again.
func (r Result) Replay() string {
	return fmt.Sprintf("make sim SEED=%d REDIS=%v", r.Seed, r.Redis)
}

// Run simulates one cluster from opt.Seed: nodes start, clients send ops while faults
// come and go, then the faults heal, the cluster settles, every counter is read and
// checked against what clients were told.
func Run(opt Options) Result {
	w := newWorld(opt)
	w.loadEnd = w.opt.Duration
	if w.skew.on {
		w.loadEnd += w.opt.Duration / 2 // for the skip to come of age (fresh.go)
	}
	for i := range w.opt.Nodes {
		n := w.addNode()
		found := i == 0
		w.sched.after(time.Duration(i)*50*time.Millisecond, nil, func() { n.start(found) })
	}
	w.every(gossipEvery, w.gossip)
	w.every(20*time.Millisecond, w.checkDeciders)
	w.sched.at(2*time.Second, nil, func() {
		for i := range 6 {
			(&client{w: w, id: i}).next()
		}
		w.startFresh()
	})
	if w.opt.Faults {
		w.injectFaults()
	}
	w.sched.runUntil(w.loadEnd)
	w.heal()
	if err := w.settle(60 * time.Second); err != nil {
		w.fail("the cluster did not settle: %v", err)
	} else {
		w.checkFinal()
	}
	return Result{Options: w.opt, Ops: w.ops, Faults: w.faults, Handoffs: w.handoffs, Slices: w.slices, Steps: w.sched.steps,
		SimTime: w.sched.now, Violations: w.failures, Trace: w.log}
}

// every runs f every d of simulated time, for the world.
func (w *world) every(d time.Duration, f func()) {
	var tick func()
	tick = func() {
		f()
		w.sched.after(d, nil, tick)
	}
	w.sched.after(d, nil, tick)
}

// checkDeciders fails the run if two nodes would decide one partition at once. Without
// Redis it also notes each time a node begins to decide a partition while another still
// holds counts of its allow keys: that node decides from its own memory, and may admit
// up to the limit again (docs/guarantees.md).
func (w *world) checkDeciders() {
	for p := range w.opt.Partitions {
		w.checkDecider(p)
	}
	w.checkTransitions()
	w.checkWipes()
	w.noteHandedIn()
}

// checkDecider is checkDeciders for partition p alone. Nodes call it for the partitions
// of each batch they decide, before its answers count: a node that begins to decide
// between two sweeps answers from memory that may lack counts another node holds, and
// the sweep after may find them gone on their way (seed 843).
func (w *world) checkDecider(p int) {
	if w.decider == nil {
		w.decider = make([]*node, w.opt.Partitions)
	}
	var by []*node
	for _, n := range w.nodes {
		if n.up && n.pausedUntil <= w.sched.now && ownerprobe.Of(n.owner).Decides(p) {
			by = append(by, n)
		}
	}
	if len(by) > 1 {
		var grants []string
		for _, n := range w.nodes {
			if n.up {
				grants = append(grants, fmt.Sprintf("%s(voters %v, grants to %q, lease until %+.3fs)", n.name, n.keeper.Voters(),
					n.keeper.GrantedTo(p), (n.keeper.Until(p)-n.mono()).Seconds()))
			}
		}
		w.fail("partition %d decided by %s and %s at once: %v", p, by[0].name, by[1].name, grants)
	}
	switch {
	case len(by) == 0:
		w.decider[p] = nil
	case by[0] != w.decider[p]: // a node begins to decide p (again)
		w.decider[p] = by[0]
		w.bypass(by[0], p)
		w.splitCounts(by[0], p)
	}
}

// splitCounts allows, when some node other than d holds counts of a key of partition
// p, a reset of it to be undone, and, without Redis, an increment key's counts to be
// short by what that node holds and an allow key to admit up to its limit again, if d
// or that node was paused or cut off lately (docs/guarantees.md; a
// lent partition is decided without its counters after lentMax, 15 s): else d should
// have waited for those counts.
func (w *world) splitCounts(d *node, p int) {
	for _, k := range w.keys.resets {
		if d.ring == nil || d.ring.Partition(k) != p {
			continue
		}
		for _, n := range w.nodes {
			if n != d && n.up && ownerprobe.Of(n.owner).InMemory(k, specOf(k), n.wall()) > 0 {
				w.keys.reset[k].erasedBack = true // its counts may come back after d's resets
			}
		}
	}
	w.unclaimedCounts(d, p)
	if w.opt.Redis {
		return
	}
	for _, k := range w.keys.incr {
		if d.ring == nil || d.ring.Partition(k) != p {
			continue
		}
		for _, n := range w.nodes {
			if n != d && n.up && w.apartLately(n, d) {
				w.keys.reads.mayLack(k, int64(ownerprobe.Of(n.owner).InMemory(k, keySpec, n.wall()))) // added back when it returns
			}
		}
	}
	for _, k := range w.keys.allow {
		if d.ring == nil || d.ring.Partition(k) != p {
			continue
		}
		for _, n := range w.nodes {
			if n != d && n.up && ownerprobe.Of(n.owner).InMemory(k, keySpec, n.wall()) > 0 && w.apartLately(n, d) {
				w.keys.overAdmit(k, allowLimit)
				break
			}
		}
	}
}

// unclaimedCounts allows, when d begins to decide partition p while another node holds
// counters of p handed to it directly and has not held p's lease since (docs/development.md: Known
// gaps, counters handed to a node not granted their partition), d's memory to lack what
// that node holds of them that Redis lacks (without Redis, all it holds of them): an
// increment key's counts to be short by that much for a while, and an allow key to admit
// that many past its limit. A node that handed them on itself waits for them (owner
// lend.go), unless the node they went to dropped out of its ring other than by a graceful leave
// (docs/guarantees.md: Counters on their way): only then is its deciding meanwhile allowed so.
func (w *world) unclaimedCounts(d *node, p int) {
	if d.ring == nil {
		return
	}
	for _, n := range w.nodes {
		from, ok := n.handedIn[p]
		if n == d || !n.up || !ok || from[d] == d.inc && (n.leaving || slices.Contains(d.inRing, n.name)) {
			continue
		}
		for _, k := range append(append([]string(nil), w.keys.incr...), w.keys.allow...) {
			if d.ring.Partition(k) != p {
				continue
			}
			held := int64(ownerprobe.Of(n.owner).InMemory(k, keySpec, n.wall()))
			if w.opt.Redis {
				held = int64(ownerprobe.Of(n.owner).Unconfirmed(k, keySpec))
			}
			w.keys.reads.mayLack(k, held)
			w.keys.overAdmit(k, held)
		}
	}
}

// noteHandedIn keeps, for each node, the partitions whose counters were handed to it
// and whose lease it has not held since (unclaimedCounts).
func (w *world) noteHandedIn() {
	for _, n := range w.nodes {
		for p := range n.handedIn {
			if !n.up || n.keeper.Holds(p, n.mono()) {
				delete(n.handedIn, p)
			}
		}
	}
}

// apartLately reports whether a or b was paused or cut off within the last 17 s (a
// lend's 15 s and a lease).
func (w *world) apartLately(a, b *node) bool {
	return max(a.apartUntil, b.apartUntil) > w.sched.now-17*time.Second
}

// heal ends every fault: links, Redis, pauses; nodes that are down start again.
func (w *world) heal() {
	w.trace("faults heal")
	clear(w.net.cut)
	clear(w.net.loss)
	w.net.spike = 0
	if w.redis.down {
		w.redis.down = false
		w.redis.reopened++
	}
	w.redis.slow, w.redis.lose = 0, 0
	for _, n := range w.nodes {
		if n.redisCut > w.sched.now {
			n.redisCut = w.sched.now
			if n.redis != nil {
				n.redis.cuts++
			}
		}
		if !n.up && !n.leaving {
			n.start(false)
		}
	}
}

// settle runs until the cluster has converged and written everything, or limit passes.
func (w *world) settle(limit time.Duration) error {
	end := w.sched.now + limit
	var polls []uint64 // each node's late-mark polls once all had written everything
	for {
		err := w.converged()
		switch {
		case err != nil:
			polls = nil
		case w.opt.Redis && polls == nil:
			polls = w.latePolls()
			err = fmt.Errorf("waiting for every node to read the late-write marks")
		case w.opt.Redis && !after(w.latePolls(), polls, 2):
			err = fmt.Errorf("waiting for every node to read the late-write marks")
		}
		if err == nil {
			return nil
		}
		if w.sched.now >= end {
			return err
		}
		w.sched.runUntil(w.sched.now + 100*time.Millisecond)
	}
}

func (w *world) latePolls() []uint64 {
	var out []uint64
	for _, n := range w.nodes {
		out = append(out, n.owner.LatePolls())
	}
	return out
}

func after(now, then []uint64, by uint64) bool {
	if len(now) != len(then) {
		return false
	}
	for i := range now {
		if now[i] < then[i]+by {
			return false
		}
	}
	return true
}

// converged says why the cluster has not settled yet (nil once it has): every node
// runs, has every node in its ring, holds every partition its ring gives it, has no
// counters on their way and, with Redis, nothing left to write.
func (w *world) converged() error {
	if w.inflight > 0 {
		return fmt.Errorf("%d client ops still on their way", w.inflight)
	}
	var epoch uint64
	for i, n := range w.nodes {
		switch {
		case !n.up:
			return fmt.Errorf("%s is down", n.name)
		case n.ring == nil || n.ring.Len() != len(w.nodes):
			var vs []string
			for _, m := range w.nodes {
				vs = append(vs, fmt.Sprintf("%s%v%s", m.name, m.keeper.Voters(), m.viewString()))
			}
			return fmt.Errorf("%s's ring has not every node (voters %v)", n.name, vs)
		case i > 0 && n.ring.Epoch() != epoch:
			return fmt.Errorf("%s's ring differs from n0's", n.name)
		}
		epoch = n.ring.Epoch()
		if v, want := n.keeper.Voters(), w.leaseCfg.TargetVoters(len(w.nodes)); len(v) != want || !slices.Equal(v, w.nodes[0].keeper.Voters()) {
			return fmt.Errorf("%s has voters %v; want %d, the same on every node", n.name, v, want)
		}
		if owned, held := n.owner.Holding(); owned != held {
			return fmt.Errorf("%s holds %d of its %d partitions", n.name, held, owned)
		}
		if h := n.owner.HandingOn(); h > 0 {
			return fmt.Errorf("%s has counters of %d partitions on their way", n.name, h)
		}
		if u := n.owner.Unwritten(); u > 0 {
			return fmt.Errorf("%s has %d counters to write", n.name, u)
		}
	}
	return nil
}

// checkFinal reads every counter through the cluster and checks it against the
// history: acknowledged increments all there (but what a fault may lose), none past
// acknowledged plus unknown, allows within their limits.
func (w *world) checkFinal() {
	final := map[string]int64{}
	for _, k := range w.keys.all() {
		c, err := w.read(k)
		if err != nil {
			w.fail("final count of %s: %v", k, err)
			continue
		}
		final[k] = c
	}
	ks := w.keys
	sum := ks.log.Check(final, ks.bounds)
	for _, v := range sum.Violations {
		w.fail("%s", v)
	}
	for _, v := range ks.reads.check(ks.bounds) {
		w.fail("%s", v)
	}
	for _, v := range w.fresh.check(ks.bounds, ks.reads.lack) {
		w.fail("%s", v)
	}
	for _, k := range ks.allow {
		t := ks.log.Tally(k)
		if room := allowLimit + ks.bounds.KeyOverAdmit[k] + ks.bounds.KeyLoss[k]; t.Admitted > room {
			w.fail("%s: %d admissions acknowledged, past limit %d (allowed over-admission %d, loss %d)", k, t.Admitted,
				int64(allowLimit), ks.bounds.KeyOverAdmit[k], ks.bounds.KeyLoss[k])
		}
	}
	for _, k := range ks.resets {
		if err := ks.reset[k].check(k, final[k]); err != nil {
			w.fail("%v", err)
		}
	}
}

// read counts key through a running node, retrying while the answer does not come.
func (w *world) read(key string) (int64, error) {
	var last error
	for try := 0; try < 10; try++ {
		entry := w.nodes[try%len(w.nodes)]
		var got *counter.Result
		c := &client{w: w}
		c.route(op(counter.Count, key, 0), entry, func(res counter.Result, _ decided) { got = &res })
		end := w.sched.now + 5*time.Second
		for got == nil && w.sched.now < end {
			w.sched.runUntil(w.sched.now + 10*time.Millisecond)
		}
		if got != nil && got.Err == nil {
			return got.Count, nil
		}
		if got != nil {
			last = got.Err
		} else {
			last = fmt.Errorf("no answer")
		}
		w.sched.runUntil(w.sched.now + 200*time.Millisecond)
	}
	return 0, last
}
