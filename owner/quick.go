package owner

import "github.com/leapcount/leapcount/counter"

// TryDo decides ops at once when every one can be decided without waiting: this node
// decides its partition now, and, with Redis, the counter is in memory or needs no
// load (see knowsAllOf). Otherwise it does nothing and reports false, and the caller
// goes to Do. An event loop calls it (respapi), and must never wait: so it does not
// even wait for the decide lock, which a ring change holds for a moment.
func (o *Owner) TryDo(ops []counter.Op, results []counter.Result) bool {
	if !o.decide.TryRLock() {
		return false
	}
	defer o.decide.RUnlock()
	rg := o.ring.Load()
	if rg == nil {
		return false
	}
	now := o.cfg.Leases.Now()
	redisUp := o.redisUp()
	if !redisUp {
		return false // decided from memory Redis may know better: Do's care is needed
	}
	skips := 0
	for i := range ops {
		op := &ops[i]
		if o.cfg.Limits.Validate(op) != nil {
			continue // answered by Local with its validation error
		}
		p := rg.Partition(op.Key)
		if o.judge(p, now, redisUp) != decideIt {
			return false
		}
		if o.cfg.Redis != nil && !o.cfg.Store.Has(op.Key, spec(op)) && !o.cfg.Store.ResetPending(op.Key, spec(op)) {
			if !o.skipsLoad(p, op) {
				return false // Redis may hold some of it: a load
			}
			skips++
		}
	}
	if o.cfg.Redis != nil {
		for i := range ops {
			if o.cfg.Limits.Validate(&ops[i]) == nil {
				o.noteDecided(rg.Partition(ops[i].Key))
			}
		}
		o.skipped.Add(int64(skips))
	}
	o.decideHere(rg, ops, results, redisUp)
	return true
}
