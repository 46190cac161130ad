package sim

import (
	"time"

	"github.com/leapcount/leapcount/lease"
)

// injectFaults injects one fault after another, each drawn from the seed, from the second
// second of the load to its end; each heals by itself after a while. Cuts last less
// than the 15 s a Handoff in doubt waits for a node out of the ring (README: counted
// twice should it come back), which is not what a run checks.
func (w *world) injectFaults() {
	var next func()
	next = func() {
		if w.sched.now >= w.loadEnd-2*time.Second {
			return
		}
		w.inject()
		w.sched.after(time.Duration(500+w.rng.IntN(2500))*time.Millisecond, nil, next)
	}
	w.sched.after(2*time.Second, nil, next)
}

// span is a fault's length: from lo to hi.
func (w *world) span(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *world) inject() {
	w.faults++
	n := w.nodes[w.rng.IntN(len(w.nodes))]
	switch r := w.rng.IntN(100); {
	case r < 14:
		w.isolate(n, w.span(500*time.Millisecond, 6*time.Second))
	case r < 22:
		m := w.nodes[w.rng.IntN(len(w.nodes))]
		if m != n {
			w.cutPair(n, m, w.span(500*time.Millisecond, 5*time.Second))
		}
	case r < 32:
		m := w.nodes[w.rng.IntN(len(w.nodes))]
		if m != n {
			w.lossy(n, m, 0.3+0.7*w.rng.Float64(), w.span(500*time.Millisecond, 4*time.Second))
		}
	case r < 38:
		w.spikes(w.span(time.Second, 3*time.Second))
	case r < 50:
		w.pause(n, w.span(200*time.Millisecond, 4*time.Second))
	case r < 60:
		w.crash(n, w.span(time.Second, 5*time.Second))
	case r < 66:
		w.join()
	case r < 74:
		w.leave(n)
	case r < 80:
		w.clockStep(n)
	case !w.opt.Redis:
		w.pause(n, w.span(200*time.Millisecond, 2*time.Second))
	case r < 86:
		w.redisDown(w.span(500*time.Millisecond, 4*time.Second))
	case r < 91:
		w.redisSlow(w.span(time.Second, 3*time.Second))
	case r < 97:
		w.redisLossy(w.span(time.Second, 3*time.Second))
	default:
		w.redisWipe()
	}
}

func (w *world) isolate(n *node, d time.Duration) {
	w.trace("isolate %s for %v", n.name, d.Round(time.Millisecond))
	for _, m := range w.nodes {
		if m != n {
			w.net.cut[pair(n, m)] = true
		}
	}
	w.sched.after(d, nil, func() {
		w.trace("heal %s", n.name)
		for _, m := range w.nodes {
			delete(w.net.cut, pair(n, m))
		}
	})
}

func (w *world) cutPair(a, b *node, d time.Duration) {
	w.trace("cut %s-%s for %v", a.name, b.name, d.Round(time.Millisecond))
	w.net.cut[pair(a, b)] = true
	w.sched.after(d, nil, func() {
		w.trace("heal %s-%s", a.name, b.name)
		delete(w.net.cut, pair(a, b))
	})
}

func (w *world) lossy(a, b *node, p float64, d time.Duration) {
	w.trace("%s->%s loses %.0f%% of messages for %v", a.name, b.name, 100*p, d.Round(time.Millisecond))
	k := [2]int{a.idx, b.idx}
	w.net.loss[k] = p
	w.sched.after(d, nil, func() { delete(w.net.loss, k) })
}

func (w *world) spikes(d time.Duration) {
	w.trace("delay spikes for %v", d.Round(time.Millisecond))
	w.net.spike = 0.2
	w.sched.after(d, nil, func() { w.net.spike = 0 })
}

func (w *world) pause(n *node, d time.Duration) {
	if !n.up {
		return
	}
	w.trace("pause %s for %v", n.name, d.Round(time.Millisecond))
	n.pausedUntil = max(n.pausedUntil, w.sched.now+d)
}

// crash kills n (if running) and starts it again after d, its memory gone: what it had
// not written to Redis (or, without Redis, all it held) may be lost.
func (w *world) crash(n *node, d time.Duration) {
	if !n.up || w.running() < 2 {
		return
	}
	w.stopsWith(n)
	n.crash()
	w.sched.after(d, nil, func() {
		if !n.up {
			n.start(false)
		}
	})
}

// stopsWith allows the loss of what n holds as it stops: what it has not written to
// Redis, or, without Redis, all it holds (a crash; a stop that could not hand its
// counters on within its shutdown timeout). Without Redis its allow keys may then admit
// up to their limit again.
func (w *world) stopsWith(n *node) {
	now := n.wall()
	for _, k := range w.keys.all() {
		// With Redis, n is behind Redis's loss of its data while it has not written its
		// memory back since: then all it holds, in memory or on its way, is lost.
		behind := w.opt.Redis && n.owner.Reseeds() < w.wipes
		lost := int64(n.owner.InMemory(k, keySpec, now))
		switch {
		case behind:
			lost = max(lost, int64(n.owner.Unconfirmed(k, keySpec)))
		case w.opt.Redis:
			lost = int64(n.owner.Unconfirmed(k, keySpec))
		}
		if lost > 0 && (!w.opt.Redis || behind) {
			w.keys.overAdmit(k, allowLimit)
		}
		w.keys.lose(k, lost)
		if h := w.keys.reset[k]; h != nil && (lost > 0 || n.owner.PendingReset(k, keySpec)) {
			h.erasedBack = true
		}
	}
}

func (w *world) running() int {
	k := 0
	for _, n := range w.nodes {
		if n.up {
			k++
		}
	}
	return k
}

// join starts a new node (at most six in all).
func (w *world) join() {
	if len(w.nodes) >= 6 {
		return
	}
	n := w.addNode()
	w.trace("%s joins", n.name)
	n.start(false)
}

// leave stops n gracefully, as SIGTERM does: it announces it is leaving, hands its
// partitions on, and stops once done (or after the shutdown timeout); it starts again
// a while later (a rolling restart).
func (w *world) leave(n *node) {
	if !n.up || n.leaving || w.running() < 3 {
		return
	}
	w.trace("%s leaves", n.name)
	n.leaving = true
	deadline := w.sched.now + 10*time.Second
	var check func()
	check = func() {
		_, inRing := n.ownerIn()
		if !inRing && n.owner.Releasing() == 0 || w.sched.now >= deadline {
			w.trace("%s stopped", n.name)
			w.stopsWith(n) // what it could not hand on in time is lost
			n.up, n.graceful = false, true
			w.sched.after(w.span(time.Second, 4*time.Second), nil, func() {
				if !n.up {
					n.start(false)
				}
			})
			return
		}
		w.sched.after(50*time.Millisecond, n, check)
	}
	w.sched.after(50*time.Millisecond, n, check)
}

func (w *world) clockStep(n *node) {
	step := time.Duration(w.rng.Int64N(int64(2*time.Second))) - time.Second
	w.trace("%s's wall clock steps %v", n.name, step.Round(time.Millisecond))
	n.offset += step
}

func (w *world) redisDown(d time.Duration) {
	w.trace("redis down for %v", d.Round(time.Millisecond))
	w.redis.down = true
	w.sched.after(d, nil, func() {
		w.trace("redis up")
		w.redis.down = false
		w.redis.reopened++
	})
}

func (w *world) redisSlow(d time.Duration) {
	w.trace("redis slow for %v", d.Round(time.Millisecond))
	w.redis.slow = time.Duration(100+w.rng.IntN(500)) * time.Millisecond
	w.sched.after(d, nil, func() { w.redis.slow = 0 })
}

func (w *world) redisLossy(d time.Duration) {
	w.trace("redis loses replies for %v", d.Round(time.Millisecond))
	w.redis.lose = 0.3
	w.sched.after(d, nil, func() { w.redis.lose = 0 })
}

// redisWipe empties Redis, as a restart without persistence does: counters held whole
// in an owner's memory keep their counts; the others restart from nothing (and may
// admit up to their limit again).
func (w *world) redisWipe() {
	w.trace("redis restarts empty")
	now := w.epochMs + int64(w.sched.now/time.Millisecond)
	for _, k := range w.keys.all() {
		whole := false // decided now by a node that holds all of it
		for _, n := range w.nodes {
			if w.responsive(n) && n.ring != nil && n.owner.Decides(n.ring.Partition(k)) && n.owner.HoldsWhole(k, keySpec) {
				whole = true
			}
		}
		if !whole {
			w.keys.lose(k, int64(w.redis.count(ref(k), now)))
			w.keys.overAdmit(k, allowLimit)
		}
	}
	w.redis.wipe()
	w.wipes++
}

// lapsed is told the partitions whose lease n lost while holding them: without Redis,
// whoever decides them meanwhile starts from nothing, and an allow key there may admit
// up to its limit again; with or without, a reset there may be undone (resetHistory).
func (w *world) lapsed(n *node, s lease.Set) {
	if n.ring == nil {
		return
	}
	if w.opt.Redis && n.owner.Reseeds() < w.wipes {
		// Redis lost its data and n has not written its memory back yet: its stale
		// memory is dropped and reloaded from nothing (README: Redis emptied).
		now := n.wall()
		for _, k := range w.keys.all() {
			if s.Has(n.ring.Partition(k)) {
				w.keys.lose(k, int64(n.owner.InMemory(k, keySpec, now)))
				w.keys.overAdmit(k, allowLimit)
			}
		}
	}
	for _, k := range w.keys.resets {
		if s.Has(n.ring.Partition(k)) {
			w.keys.reset[k].erasedBack = true
		}
	}
	if w.opt.Redis {
		return
	}
	for _, k := range w.keys.allow {
		if s.Has(n.ring.Partition(k)) {
			w.keys.overAdmit(k, allowLimit)
		}
	}
}
