package sim

import (
	"math/rand/v2"
	"os"
	"time"

	"github.com/leapcount/leapcount/internal/ownerprobe"
)

func (w *world) redisDown(d time.Duration) {
	w.trace("redis down for %v", d.Round(time.Millisecond))
	w.redis.down = true
	w.redis.downUntil = max(w.redis.downUntil, w.sched.now+d)
	w.sched.after(d, nil, func() {
		if w.redis.down && w.sched.now >= w.redis.downUntil { // (not while a later outage lasts)
			w.trace("redis up")
			w.redis.down = false
			w.redis.reopened++
		}
	})
}

// redisCut cuts n's way to Redis (the other nodes still reach it) for d, after a
// flaky spell in which half its requests or their replies are lost: its calls then in
// doubt stay so. Most of the time the ring moves
// while it lasts: n hands counters on directly, with those calls as fences, to nodes
// that read Redis, and a second move (two nodes joining one after the other, as when a
// fleet scales out) may hand them on again through Redis before n can send its calls
// again.
func (w *world) redisCut(n *node, d time.Duration) {
	flaky := w.span(200*time.Millisecond, 800*time.Millisecond)
	w.trace("%s cut from redis for %v, after %v of lost calls", n.name, d.Round(time.Millisecond), flaky.Round(time.Millisecond))
	n.redisFlaky = max(n.redisFlaky, w.sched.now+flaky)
	w.sched.after(flaky, nil, func() {
		n.redisCut = max(n.redisCut, w.sched.now+d)
		w.sched.after(d, nil, func() {
			if w.sched.now >= n.redisCut && n.redis != nil {
				w.trace("%s reaches redis again", n.name)
				n.redis.cuts++
			}
		})
		switch w.rng.IntN(3) {
		case 0:
			w.sched.after(w.span(100*time.Millisecond, 800*time.Millisecond), nil, w.churn)
		case 1:
			w.sched.after(w.span(100*time.Millisecond, 500*time.Millisecond), nil, w.join)
			w.sched.after(w.span(2200*time.Millisecond, 3500*time.Millisecond), nil, w.join)
		}
	})
}

func (w *world) redisSlow(d time.Duration) {
	w.trace("redis slow for %v", d.Round(time.Millisecond))
	w.redis.slow = time.Duration(100+w.rng.IntN(500)) * time.Millisecond
	w.sched.after(d, nil, func() { w.redis.slow = 0 })
}

func (w *world) redisLossy(d time.Duration) {
	w.trace("redis loses requests or replies for %v", d.Round(time.Millisecond))
	w.redis.lose = 0.3
	w.sched.after(d, nil, func() { w.redis.lose = 0 })
}

// injectFailovers makes a third of the runs with Redis fail it over to a replica that
// lagged, now and then (redisFailover). Drawn from a stream of their own, so that a run
// without them is the run its seed made before they were modelled. Not with Redis
// restarting empty (a known gap, docs/guarantees.md, "Redis emptied"), unless
// LEAPCOUNT_SIM_WIPE_FAILOVERS=1.
func (w *world) injectFailovers(kinds []faultKind) {
	fr := rand.New(rand.NewPCG(w.opt.Seed, 0xfa110fe7))
	if !w.opt.Redis || fr.IntN(3) != 0 || hasKind(kinds, "redis-wipe") && !wipeFailovers {
		return
	}
	w.trace("and redis-failover")
	var next func()
	next = func() {
		if w.sched.now >= w.loadEnd-2*time.Second {
			return
		}
		w.redisFailover(300*time.Millisecond + time.Duration(fr.Int64N(int64(3*time.Second))))
		w.sched.after(time.Duration(2000+fr.IntN(3000))*time.Millisecond, nil, next)
	}
	w.sched.after(time.Duration(1000+fr.IntN(3000))*time.Millisecond, nil, next)
}

// wipeFailovers runs Redis restarting empty and failovers in one run (injectFailovers).
var wipeFailovers = os.Getenv("LEAPCOUNT_SIM_WIPE_FAILOVERS") == "1"

// redisFailover stops the replica following Redis for d, then, even odds, makes it
// take over (a failover to a replica that lagged: what it lacked is lost from Redis,
// and was never confirmed) or lets it catch up. Nothing acknowledged may be lost.
func (w *world) redisFailover(d time.Duration) {
	if w.redis.lagging != nil || w.redis.epoch == "" {
		// (Before the first stamp, a replica that took over would lack the stamps'
		// epoch: that is Redis emptied, redisWipe, not this fault.)
		return
	}
	w.trace("redis's replica stops following for %v", d.Round(time.Millisecond))
	w.redis.lagging = w.redis.snapshot()
	w.sched.after(d, nil, func() {
		switch {
		case w.redis.lagging == nil: // (emptied meanwhile: it followed again)
		case d%2 == 0: // even odds, without a draw from the run's stream
			w.trace("redis fails over to its replica, which lacks what it did not follow")
			w.redis.takeOver()
		default:
			w.trace("redis's replica catches up")
			w.redis.lagging = nil
		}
	})
}

// redisWipe empties Redis, as a restart without persistence does. What that may lose
// of each counter is wipes.go's to allow.
func (w *world) redisWipe() {
	w.trace("redis restarts empty")
	now := w.epochMs + int64(w.sched.now/time.Millisecond)
	for _, k := range w.keys.tracked() {
		var whole *node // decides k now, and holds all of it
		for _, n := range w.nodes {
			if w.responsive(n) && n.ring != nil && ownerprobe.Of(n.owner).Decides(n.ring.Partition(k)) && ownerprobe.Of(n.owner).HoldsWhole(k, specOf(k)) && !w.lacksLate(n, k) {
				whole = n
			}
		}
		w.wipeCounter(k, int64(w.redis.lost(ref(k), now)), whole)
	}
	w.redis.wipe()
	w.lastWipe = w.sched.now
}
