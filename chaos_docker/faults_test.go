//go:build chaos

package chaosdocker

import (
	"maps"
	"slices"
	"time"
)

// The scenarios' faults. Each says what README's Guarantees table allows for it and
// sets exactly that; what a fault does not allow stays zero.

// killOwner: SIGKILL node2 (docker kill), keep it down past detection, start it again.
// Allowed: each counter may lose what was acknowledged for it in the loss window, two
// flush intervals before the kill to one after (what node2 counted and had not
// written to Redis); allow keys the same admissions, and never past their limit.
// Clients keep sending through node2's port: refused while it is down.
func killOwner(r *run) {
	w := r.around(func() { r.c.kill("node2") })
	r.bounds.incr.KeyLoss, r.bounds.allow.KeyLoss = w.incr, w.allow
	r.hold(pastDetection)
	start := time.Now()
	r.c.start("node2")
	r.t.Logf("kill: node2 started and converged in %v", r.c.waitConverged(start, r.c.members...))
	r.hold(settle)
}

// pauseOwner: freeze node2 (docker pause) past detection, then thaw it. Allowed: no
// loss; allow keys may pass their limit by what node2 admitted in the window around
// the freeze (written to Redis only after it thaws).
func pauseOwner(r *run) {
	r.drain("node2")
	w := r.around(func() { r.c.pause("node2") })
	r.bounds.allow.KeyOverAdmit = w.allow
	r.hold(pastDetection)
	start := time.Now()
	r.c.unpause("node2")
	r.t.Logf("pause: node2 thawed and converged in %v", r.c.waitConverged(start, r.c.members...))
	r.send(r.c.members...)
	r.hold(settle)
}

// cutOwner: disconnect node3 from the compose network (from its peers and from Redis)
// past detection; node1 and node2 must become the cluster, and all three one cluster
// again within healBound of the reconnect. Allowed: no loss (node3 writes its deltas
// when it reaches Redis again); allow keys may pass their limit by what node3 admitted
// in the window around the cut, as it could not reach Redis either.
func cutOwner(r *run) {
	r.drain("node3")
	var network, ip string
	cut := time.Now()
	w := r.around(func() { network, ip = r.c.disconnect("node3") })
	r.bounds.allow.KeyOverAdmit = w.allow
	r.t.Logf("partition: node1 and node2 alone %v after the cut", r.c.waitConverged(cut, r.c.others("node3")...))
	r.hold(pastDetection)
	healed := time.Now()
	r.c.reconnect("node3", network, ip)
	took := r.c.waitConverged(healed, r.c.members...)
	r.t.Logf("partition: one membership again %v after the cut healed", took)
	if took > healBound {
		r.t.Errorf("partition: one membership again %v after the cut healed; want within %v", took, healBound)
	}
	r.send(r.c.members...)
	r.hold(settle)
}

// redisDown: stop Redis (its data kept) under load, start it again. Allowed: nothing.
func redisDown(r *run) {
	r.c.stopRedis()
	r.c.waitRedis(false)
	r.hold(8 * time.Second)
	r.c.startRedis()
	r.c.waitRedis(true)
	r.hold(settle)
}

// redisLost: stop Redis, remove its container and data volume, start a new empty one,
// then restart node1, so that its counters leave its memory and go through Redis.
// Allowed: counters not in an owner's memory restart from what Redis holds. So the
// counters node1 owned may lose what was acknowledged before Redis stopped (allow keys
// those admissions, and so may admit them again); every other counter stays in its
// owner's memory (10-minute windows) and may lose nothing. Two probed counters of one
// partition of node2 check that for a partition where a counter was first counted while
// Redis was down (a: 5 before the outage, b: first during it).
func redisLost(r *run) {
	a, b := r.pairOn("node2")
	for range 5 {
		r.probe("node2", a)
	}
	moves := r.c.movesOf(r.c.members)
	r.c.stopRedis()
	before := r.acked() // Redis is stopped: nothing acknowledged later was written to it
	r.c.waitRedis(false)
	r.probe("node2", b)
	r.probe("node2", b)
	r.c.wipeRedis()
	r.c.waitRedis(true)
	r.hold(settle)
	// A ring rebuilt or a lease lapsed while Redis was lost moves counters, which may then
	// lose what docs/guarantees.md says (Redis emptied); the checker allows node1's alone.
	r.t.Logf("%s: ring builds and lease lapses across the outage: %v -> %v", r.name, moves, r.c.movesOf(r.c.members))
	r.mayLoseOf("node1", before)
	restartOne(r, "node1")
}

// mayLoseOf allows the counters node owns now to lose what before holds for them.
func (r *run) mayLoseOf(node string, before acks) {
	moved := r.c.ownedBy(node, append(r.incrs.Keys(), slices.Collect(maps.Keys(before.allow))...))
	if len(moved) == 0 {
		r.t.Fatalf("%s: %s owns none of the counters: restarting it would move nothing", r.name, node)
	}
	r.t.Logf("%s: %s owns %d of the %d counters; they may lose what was acknowledged before Redis stopped", r.name, node, len(moved), len(before.incr)+len(before.allow))
	lost := before.only(moved)
	r.bounds.incr.KeyLoss, r.bounds.allow.KeyLoss = lost.incr, lost.allow
}

// joinAndLeave: node4 joins under load, takes traffic, then leaves gracefully
// (drained, SIGTERM). Allowed: nothing.
func joinAndLeave(r *run) {
	start := time.Now()
	r.c.join()
	r.t.Logf("join: node4 started and four nodes converged in %v", r.c.waitConverged(start, r.c.members...))
	r.send(r.c.members...)
	r.hold(4 * time.Second)
	r.drain("node4")
	start = time.Now()
	r.c.leave()
	r.t.Logf("join: node4 stopped and three nodes converged in %v", r.c.waitConverged(start, r.c.members...))
	r.hold(settle)
}

// rollingRestart: each node in turn drained, restarted (SIGTERM, start) and back in
// the cluster before the next. Allowed: nothing.
func rollingRestart(r *run) {
	for _, n := range []string{"node1", "node2", "node3"} {
		restartOne(r, n)
	}
}

func restartOne(r *run, node string) {
	r.drain(node)
	start := time.Now()
	r.c.restart(node)
	r.t.Logf("%s: %s restarted and converged in %v", r.name, node, r.c.waitConverged(start, r.c.members...))
	r.send(r.c.members...)
	r.hold(settle)
}

// skewedClock: node3 runs 90 s ahead (skew.yml: --test-clock-offset, a bucket and a
// half of the load's 10-minute windows of 10 buckets), and is restarted, so counters
// move from its clock to the others' and back. Allowed: nothing, as long as the skew
// is far inside the window: a counter moved to a node whose clock is ahead loses, a
// skew early, what fell in the window's oldest skew.
func skewedClock(r *run) {
	r.c.logged("node3", "test_clock_offset=1m30s")
	restartOne(r, "node3")
}
