package leaparray

import (
	"errors"
	"math"
	"sync/atomic"
)

// Bounds cap what a store made WithBounds holds, so that a client inventing keys or
// window shapes cannot take the process's memory. A zero field means no cap.
//
// Counters are counted in units: a counter of up to UnitBuckets buckets is one unit, a
// larger one is one per UnitBuckets buckets (rounded up), since its ring costs that
// many small counters' memory; without that, a cap on counters would not bound memory
// for counters of 3600 buckets.
type Bounds struct {
	MaxUnits  int64 // counter units held (see UnitBuckets)
	MaxShapes int   // distinct Specs held: each has its own table of shards
}

// UnitBuckets is how many buckets one counter unit holds.
const UnitBuckets = 16

// Units is how many units a counter of sp weighs against Bounds.MaxUnits.
func Units(sp Spec) int64 { return int64(max(1, (sp.Buckets+UnitBuckets-1)/UnitBuckets)) }

// Errors of the bounded operations (TryIncr, TryAllow, TryReset, TrySeed).
var (
	// ErrFull: the counter is not held and the store holds MaxUnits, none of them
	// idle past its window (those are reclaimed first). Nothing was changed.
	ErrFull = errors.New("leaparray: no room for another counter")
	// ErrTooManyShapes: the counter's Spec is not held and the store holds MaxShapes
	// Specs. A Spec's table goes once a sweep pass finds it empty.
	ErrTooManyShapes = errors.New("leaparray: no room for another window shape")
)

// admitFactor bounds what the admitting operations (Merge, Seed: state handed over
// from elsewhere, which must not be lost) may hold past the bounds: Admits refuses what
// would take the store past admitFactor times them.
const admitFactor = 2

// WithBounds caps the counters and Specs that the bounded operations create. The
// admitting ones (Merge, Seed) create past the caps; callers check Admits before taking
// handed-over state in.
func WithBounds(b Bounds) Option {
	return func(s *Store) {
		lim := &bounds{maxUnits: b.MaxUnits, maxShapes: b.MaxShapes}
		lim.fruitless.Store(math.MinInt64)
		s.tables.lim = lim
	}
}

// mode says whether an operation may create its counter, and within which bounds.
type mode uint8

const (
	lookup  mode = iota // never creates
	bounded             // creates within the bounds
	admit               // creates past the bounds: handed-over state (and the tests' Incr, Allow, Reset)
)

// bounds is a store's caps and the units it holds. Every shard of a bounded store
// points to it; units changes only when a counter is created or removed, never on an
// operation on a counter already held, so the hot path does not touch it.
type bounds struct {
	_         [64]byte // units is written by every shard: keep it off its neighbours' cache line
	units     atomic.Int64
	_         [56]byte
	maxUnits  int64
	maxShapes int
	fruitless atomic.Int64 // the now of the last reclaim that found nothing
}

// take reserves w units for a new counter, and reports whether it may be created.
func (b *bounds) take(w int64, m mode) bool {
	if b == nil {
		return true
	}
	n := b.units.Add(w)
	if m == admit || b.maxUnits == 0 || n <= b.maxUnits {
		return true
	}
	b.units.Add(-w)
	return false
}

// give returns a removed counter's w units.
func (b *bounds) give(w int64) {
	if b != nil {
		b.units.Add(-w)
	}
}

// shapesFull reports whether a bounded operation may not add a Spec to the held ones.
func (b *bounds) shapesFull(held int, m mode) bool {
	return b != nil && m == bounded && b.maxShapes > 0 && held >= b.maxShapes
}

// Used is the counter units the store holds (0 for a store without bounds, which does
// not count them).
func (s *Store) Used() int64 {
	if s.tables.lim == nil {
		return 0
	}
	return s.tables.lim.units.Load()
}

// Shapes is the number of Specs the store holds a table for.
func (s *Store) Shapes() int { return len(s.tables.cur.Load().list) }

// Admits reports whether the store may take in handed-over counters of these Specs
// (one Spec per counter, whether held already or not): nil when they keep it within
// twice its bounds, else ErrFull or ErrTooManyShapes. It counts every counter as new,
// so it errs on the side of refusing; a caller that gets an error should leave the
// state with its sender, which tries again later.
func (s *Store) Admits(specs []Spec) error {
	b := s.tables.lim
	if b == nil {
		return nil
	}
	var w int64
	var fresh []Spec
	ts := s.tables.cur.Load()
	for _, sp := range specs {
		w += Units(sp)
		if ts.get(sp) == nil && !containsSpec(fresh, sp) {
			fresh = append(fresh, sp)
		}
	}
	if b.maxUnits > 0 && b.units.Load()+w > admitFactor*b.maxUnits {
		return ErrFull
	}
	if b.maxShapes > 0 && len(ts.list)+len(fresh) > admitFactor*b.maxShapes {
		return ErrTooManyShapes
	}
	return nil
}

func containsSpec(list []Spec, sp Spec) bool {
	for _, x := range list {
		if x == sp {
			return true
		}
	}
	return false
}

// reclaimBudget bounds how many counters a reclaim looks at for idle ones, and
// reclaims run at most once per millisecond of now while they find nothing: when the
// store is full of live counters, a flood of new keys costs a few microseconds a
// millisecond, not each.
const reclaimBudget = 1024

// reclaim forgets idle counters, looking at no more than reclaimBudget of them, and
// returns how many it forgot. A sweep running meanwhile is left to do it.
func (s *Store) reclaim(now int64) int {
	b := s.tables.lim
	if b.fruitless.Load() == now || !s.cursor.mu.TryLock() {
		return 0
	}
	defer s.cursor.mu.Unlock()
	removed, _ := s.sweepSteps(now, reclaimBudget)
	if removed == 0 {
		b.fruitless.Store(now)
	}
	return removed
}

// withRoom runs op, and when it found the store full, reclaims idle counters and runs
// it once more.
func withRoom[T any](s *Store, now int64, op func() (T, error)) (T, error) {
	v, err := op()
	if err == ErrFull && s.reclaim(now) > 0 {
		v, err = op()
	}
	return v, err
}
