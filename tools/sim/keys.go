package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/history"
	"github.com/leapcount/leapcount/leaparray"
)

// The keys clients use: incremented keys and allow keys, checked with the history
// checker (internal/testkit/history), and reset keys, whose resets the checker of resets.go
// judges. Windows are long (10 minutes) next to a run, so nothing leaves them.
const (
	windowMs   = 600_000
	buckets    = 10
	allowLimit = 40
)

var keySpec = leaparray.Spec{WindowMs: windowMs, Buckets: buckets}

type keySet struct {
	w      *world
	incr   []string
	allow  []string
	resets []string
	log    history.Log
	bounds history.Bounds
	reset  map[string]*resetHistory
	reads  readLog
}

func newKeySet(w *world) *keySet {
	ks := &keySet{w: w, bounds: history.Bounds{KeyLoss: map[string]int64{}, KeyOverAdmit: map[string]int64{}, KeyExtra: map[string]int64{}},
		reset: map[string]*resetHistory{}, reads: newReadLog()}
	for i := range 12 {
		ks.incr = append(ks.incr, fmt.Sprintf("incr:%d", i))
	}
	for i := range 4 {
		ks.allow = append(ks.allow, fmt.Sprintf("allow:%d", i))
	}
	for i := range 3 {
		k := fmt.Sprintf("reset:%d", i)
		ks.resets = append(ks.resets, k)
		ks.reset[k] = &resetHistory{}
	}
	return ks
}

func (ks *keySet) all() []string {
	return append(append(append([]string(nil), ks.incr...), ks.allow...), ks.resets...)
}

// tracked is all and the fresh keys that may hold counts: those a fault's allowances
// look at.
func (ks *keySet) tracked() []string {
	return append(ks.all(), slices.Sorted(maps.Keys(ks.w.fresh.newest))...)
}

func (ks *keySet) isAllow(key string) bool {
	for _, k := range ks.allow {
		if k == key {
			return true
		}
	}
	return false
}

func ref(key string) fallback.CounterRef { return fallback.CounterRef{Key: key, Spec: specOf(key)} }

func op(kind counter.Kind, key string, n int64) counter.Op {
	sp := specOf(key)
	o := counter.Op{Kind: kind, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets, N: n}
	if kind == counter.Allow {
		o.Limit = allowLimit
	}
	return o
}

// record notes what a client was told of op, sent at start and decided as d.
func (ks *keySet) record(o counter.Op, res counter.Result, d decided, start time.Duration) {
	outcome := history.ClassifyResult(res)
	if isFresh(o.Key) {
		ks.w.fresh.record(o, res, outcome, d, start, ks.w.sched.now)
		return
	}
	if h := ks.reset[o.Key]; h != nil {
		h.add(o, res, outcome, start, ks.w.sched.now)
		return
	}
	switch o.Kind {
	case counter.Incr:
		ks.log.Incr(o.Key, o.N, outcome)
		ks.reads.incr(o.Key, o.N, outcome, start, ks.w.sched.now)
	case counter.Count:
		if outcome == history.OK {
			ks.reads.read(o.Key, res.Count, start, ks.w.sched.now)
		}
	case counter.Allow:
		ks.log.Allow(o.Key, o.Limit, o.N, res.Allowed, outcome)
	}
}

// lose allows key to have lost up to n acknowledged counts (a fault that may).
func (ks *keySet) lose(key string, n int64) {
	if n > 0 {
		ks.bounds.KeyLoss[key] += n
		if h := ks.reset[key]; h != nil {
			h.loss += n
		}
	}
}

// extra allows key to count up to n more than acknowledged plus unknown.
func (ks *keySet) extra(key string, n int64) {
	if n > 0 {
		ks.bounds.KeyExtra[key] += n
		ks.overAdmit(key, n)
	}
}

// reserved allows key to count up to n more than acknowledged plus unknown, and nothing
// more admitted: a slice lent (slices.go) is counted whole, and only what is spent of
// it is admitted.
func (ks *keySet) reserved(key string, n int64) {
	if n > 0 {
		ks.bounds.KeyExtra[key] += n
	}
}

// overAdmit allows an allow key to admit up to n past its limit.
func (ks *keySet) overAdmit(key string, n int64) {
	if n > 0 && ks.isAllow(key) {
		ks.bounds.KeyOverAdmit[key] += n
	}
}

// lateWrite is told of n counts of key written to Redis after their writer's lease
// ended: until the owner reloads them, its memory lacks them, and may admit that many
// past the limit.
func (ks *keySet) lateWrite(key string, n int64) {
	ks.overAdmit(key, n)
	ks.reads.mayLack(key, n)
	if h := ks.reset[key]; h != nil {
		h.erasedBack = true // it lands after what the new owner did meanwhile, resets too
	}
}

// pick chooses the next op: mostly increments, some allows, counts and, on the reset
// keys, increments and resets.
func (ks *keySet) pick(rng interface{ IntN(int) int }) counter.Op {
	switch r := rng.IntN(100); {
	case r < 45:
		return op(counter.Incr, ks.incr[rng.IntN(len(ks.incr))], int64(1+rng.IntN(3)))
	case r < 63:
		return op(counter.Allow, ks.allow[rng.IntN(len(ks.allow))], 1)
	case r < 78:
		return op(counter.Count, ks.incr[rng.IntN(len(ks.incr))], 0)
	case r < 95:
		return op(counter.Incr, ks.resets[rng.IntN(len(ks.resets))], 1)
	}
	return op(counter.Reset, ks.resets[rng.IntN(len(ks.resets))], 0)
}
