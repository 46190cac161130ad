package owner

import "github.com/leapcount/leapcount/counter"

// decideAtOnce decides ops when every one can be decided without waiting: this node
// decides its partition now, and, with Redis up, the counter is in memory or needs no
// load (see skipsLoad). Otherwise it does nothing and reports false, and Decide takes
// the way that may wait. It must not wait for the decide lock either (an event loop
// calls it), which a ring change holds for a moment. Ops are checked (Decide).
func (o *Owner) decideAtOnce(ops []counter.Op, results []counter.Result) bool {
	if !o.decide.TryRLock() {
		return false
	}
	defer o.decide.RUnlock()
	rg := o.ring.Load()
	if rg == nil {
		return false
	}
	now := o.cfg.Clock.Since()
	redisUp := o.redisUp()
	if !redisUp {
		return false // decided from memory Redis may know better: the care of start is needed
	}
	skips := 0
	for i := range ops {
		op := &ops[i]
		if !op.Checked() {
			continue // answered by Local with its validation error
		}
		p := rg.SlotPartition(op.Slot)
		if o.judge(p, now, redisUp) != decideIt {
			return false
		}
		if o.cfg.Redis != nil && !o.cfg.Store.HeldOrResetPending(op.Key, spec(op)) {
			if !o.skipsLoad(p, op) {
				return false // Redis may hold some of it: a load
			}
			o.traceLoad(op.Key, p, nil)
			skips++
		}
	}
	if o.cfg.Redis != nil {
		for i := range ops {
			if ops[i].Checked() {
				o.noteDecided(rg.SlotPartition(ops[i].Slot))
			}
		}
		o.skipped.Add(int64(skips))
	}
	o.decideHere(rg, ops, results, redisUp)
	return true
}
