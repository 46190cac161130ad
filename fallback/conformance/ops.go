package conformance

import (
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
)

// one moves the clock and runs one random operation on both stores.
func (r *runner) one() {
	r.t.Helper()
	if r.step%r.o.Phase == 0 {
		r.newPhase()
	}
	key := r.o.Keys[r.rng.IntN(len(r.o.Keys))]
	if r.rng.IntN(2) == 0 { // hot keys: counters with many buckets filled
		key = r.o.Keys[r.rng.IntN(min(2, len(r.o.Keys)))]
	}
	sp := r.active[r.rng.IntN(len(r.active))]
	r.now += r.timeStep(sp)
	switch p := r.rng.IntN(100); {
	case p < 28:
		n := r.pickN()
		w, werr := r.want.Incr(key, sp, n, r.now)
		g, gerr := r.got.Incr(key, sp, n, r.now)
		r.check(fmt.Sprintf("incr(%q, %v, n=%d)", key, sp, n), w, g, werr, gerr)
	case p < 45:
		w, werr := r.want.Count(key, sp, r.now)
		g, gerr := r.got.Count(key, sp, r.now)
		r.check(fmt.Sprintf("count(%q, %v)", key, sp), w, g, werr, gerr)
	case p < 73:
		limit, n := r.pickLimit(), r.pickN()
		w, werr := r.want.Allow(key, sp, limit, n, r.now)
		g, gerr := r.got.Allow(key, sp, limit, n, r.now)
		r.check(fmt.Sprintf("allow(%q, %v, limit=%d, n=%d)", key, sp, limit, n), w, g, werr, gerr)
	case p < 76:
		w, werr := r.want.Reset(key, sp, r.now)
		g, gerr := r.got.Reset(key, sp, r.now)
		r.check(fmt.Sprintf("reset(%q, %v)", key, sp), w, g, werr, gerr)
	case p < 88:
		r.merge(key, sp)
	default:
		w, werr := r.want.Snapshot(key, sp, r.now)
		g, gerr := r.got.Snapshot(key, sp, r.now)
		r.check(fmt.Sprintf("snapshot(%q, %v)", key, sp), norm(w), norm(g), werr, gerr)
	}
}

// newPhase picks the one or two shapes the next Phase steps use, so that the clock
// moves at a scale that suits them (a mix of 10 ms and 1 h windows would only ever see
// the small ones jump whole windows).
func (r *runner) newPhase() {
	r.active = r.active[:0]
	for range 1 + r.rng.IntN(2) {
		r.active = append(r.active, r.o.Specs[r.rng.IntN(len(r.o.Specs))])
	}
}

// merge merges the same buckets into both stores: another counter's snapshot (the
// handoff case) or a random list around the current bucket, older and newer ones too.
func (r *runner) merge(key string, sp leaparray.Spec) {
	r.t.Helper()
	var bs []leaparray.Bucket
	if r.rng.IntN(2) == 0 {
		from := r.o.Keys[r.rng.IntN(len(r.o.Keys))]
		w, werr := r.want.Snapshot(from, sp, r.now)
		g, gerr := r.got.Snapshot(from, sp, r.now)
		r.check(fmt.Sprintf("snapshot(%q, %v) to merge", from, sp), norm(w), norm(g), werr, gerr)
		if total(w) > 1<<40 { // repeated cross-merges double counts; stay far below 2^53
			return
		}
		bs = w
	} else {
		bs = r.randomBuckets(sp)
	}
	werr := r.want.Merge(key, sp, bs, r.now)
	gerr := r.got.Merge(key, sp, bs, r.now)
	r.check(fmt.Sprintf("merge(%q, %v, %v)", key, sp, bs), nil, nil, werr, gerr)
}

func (r *runner) randomBuckets(sp leaparray.Spec) []leaparray.Bucket {
	j, b := sp.Bucket(r.now), int64(sp.Buckets)
	bs := make([]leaparray.Bucket, r.rng.IntN(6))
	for i := range bs {
		bs[i] = leaparray.Bucket{Index: j - 2*b + r.rng.Int64N(3*b+1), Count: uint64(r.rng.IntN(20))}
	}
	return bs
}

func total(bs []leaparray.Bucket) uint64 {
	var s uint64
	for _, b := range bs {
		s += b.Count
	}
	return s
}

// timeStep moves the clock by a random amount scaled to the operation's shape: often
// not at all or within a bucket, sometimes across the window's edge, sometimes many
// windows ahead, and sometimes back.
func (r *runner) timeStep(sp leaparray.Spec) int64 {
	l, w := sp.BucketMs(), sp.WindowMs
	switch p := r.rng.IntN(100); {
	case p < 35:
		return 0
	case p < 60:
		return r.rng.Int64N(l + 1)
	case p < 70:
		return r.rng.Int64N(w + 1)
	case p < 77:
		return (w/l - 1 + r.rng.Int64N(3)) * l // one bucket either side of a whole window
	case p < 82:
		return 2*w + r.rng.Int64N(50*w)
	case p < 92:
		return -r.rng.Int64N(2*w + 1)
	}
	return -r.rng.Int64N(l + 1)
}

func (r *runner) pickN() int64 {
	switch p := r.rng.IntN(100); {
	case p < 60:
		return 1
	case p < 80:
		return 2 + r.rng.Int64N(9)
	case p < 90:
		return 0
	case p < 95:
		return r.rng.Int64N(1000)
	case p < 98:
		return -1
	}
	return 1<<31 - 1
}

func (r *runner) pickLimit() int64 {
	switch p := r.rng.IntN(100); {
	case p < 40:
		return r.rng.Int64N(11)
	case p < 70:
		return r.rng.Int64N(31)
	case p < 80:
		return 0
	case p < 90:
		return r.rng.Int64N(5000)
	case p < 95:
		return 1 << 62
	}
	return -1
}
