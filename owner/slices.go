package owner

import (
	"sync"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// Limit slices, the owner's side (docs/slices-and-replicas.md, "A simpler way"). A Borrow
// is an allow that also asks for a slice: the owner adds the slice to the counter's
// current bucket at once, as admitted, and lends it until that bucket ends and no later
// than this node may decide the partition (its lease, less the lease's margin). So every
// admission the borrower makes from it is already counted, in a bucket that counts it
// for as long as the window needs; the slice travels with the counter (write-behind,
// Handoffs, reloads) like any add, and is lost in a crash like any add. What the
// borrower did not spend comes back in a Return and is taken off that bucket once.
//
// Which slices are out is kept here, not in the partition's Record: it is per counter,
// and only returns read it. A return is taken only in the Record generation its slice
// was lent in (Record.Gen): memory that was dropped, reloaded or handed on since may not
// hold the slice any more, and taking it would take other admissions off.

// Bounds of lending.
const (
	// sliceShare is the part of what the limit has left that one slice may take: the
	// first borrowers leave room for others, and slices shrink as the limit nears.
	sliceShare = 8
	// sliceKeep is the part of the limit never lent: the last units are decided by the
	// owner alone.
	sliceKeep = 16
	// minSliceTTL: a slice that would end sooner is not worth its round trip, unless
	// its buckets are short (minSliceTTLFor).
	minSliceTTL = 100 * time.Millisecond
	// sliceTTLShare is the part of a short bucket a slice must still have.
	sliceTTLShare = 5
	// returnGrace is how long after its end a slice's return is still taken; a return
	// later than that is dropped (the counter stays too high: under-admission only).
	returnGrace = 10 * time.Second
	// maxSlicesOut bounds the slices remembered: past it nothing more is lent.
	maxSlicesOut = 1 << 16
)

// lender remembers the slices lent and not yet returned.
type lender struct {
	mu   sync.Mutex // a leaf: nothing else is taken under it
	next uint64
	out  map[uint64]lentSlice
	lent uint64 // slices lent so far (under mu)
	back uint64 // returns taken so far (under mu)
}

// lentSlice is what a return needs to take a slice's unspent part back.
type lentSlice struct {
	key    string
	spec   leaparray.Spec
	bucket int64 // the bucket it was added to
	n      int64
	part   int
	gen    uint64        // its partition's Record.Gen when lent
	forget time.Duration // Clock.Since after which its return is no longer taken
}

func (l *lender) init(base uint64) {
	l.next = base
	l.out = map[uint64]lentSlice{}
}

// sliceSize is the slice lent to an ask, at count (after the Borrow's own hits) of
// limit: at most an eighth of what is left above the part the owner keeps.
func sliceSize(limit, count, ask int64) int64 {
	if mutate.On(mutate.LendPastLimit) {
		return ask
	}
	keep := max(1, limit/sliceKeep)
	left := limit - keep - count
	if left < sliceShare {
		return min(ask, max(0, left), 1) // one at a time near the limit
	}
	return min(ask, left/sliceShare)
}

// minSliceTTLFor is the least time a slice of a counter of sp must have left to be lent:
// minSliceTTL, or a fifth of a bucket shorter than five of it. A slice ends with its
// bucket, so a per-second limit's 100 ms buckets would otherwise never be lent.
func minSliceTTLFor(sp leaparray.Spec) time.Duration {
	return min(minSliceTTL, time.Duration(sp.BucketMs())*time.Millisecond/sliceTTLShare)
}

// settleSlices lends the slices the Borrows among ops asked for and takes back what
// Returns give back, once Local decided them (results). The caller holds decide shared
// and decided every op of ops here.
func (o *Owner) settleSlices(rg *ring.Ring, ops []counter.Op, results []counter.Result) {
	for i := range ops {
		op := &ops[i]
		if results[i].Err != nil || !op.Checked() {
			continue
		}
		switch op.Kind {
		case counter.Borrow:
			// A denied allow leaves nothing to lend.
			if results[i].Allowed || mutate.On(mutate.LendPastLimit) {
				results[i].Lent = o.lendSlice(rg.SlotPartition(op.Slot), op, results[i].Count)
			}
		case counter.Return:
			results[i] = o.takeBack(rg.SlotPartition(op.Slot), op)
		}
	}
}

// lendSlice lends a slice of op's counter, at count after op's own hits, if one is worth
// lending: nil otherwise.
func (o *Owner) lendSlice(p int, op *counter.Op, count int64) *counter.Lent {
	sp := spec(op)
	now, mono := o.cfg.Now(), o.cfg.Clock.Since()
	bucket := sp.Bucket(now)
	ttl := min(time.Duration((bucket+1)*sp.BucketMs()-now)*time.Millisecond, o.cfg.Leases.DecideUntil(p)-mono)
	s := sliceSize(op.Limit, count, op.Ask)
	if ttl < minSliceTTLFor(sp) || s < 1 {
		return nil
	}
	if o.SlicesOut() >= maxSlicesOut {
		return nil // (checked apart from the add: concurrent lends may pass it by a few)
	}
	limit := op.Limit - max(1, op.Limit/sliceKeep)
	if mutate.On(mutate.LendPastLimit) {
		limit = counter.MaxLimit
	}
	// Checked and added in one step of the store: an allow decided meanwhile on the
	// counter cannot make the slice pass the limit.
	d, err := o.cfg.Store.TryAllow(op.Key, sp, limit, s, now)
	if err != nil || !d.Allowed {
		return nil
	}
	gen := o.parts.at(p).Gen
	o.lend.mu.Lock()
	o.lend.next++
	o.lend.lent++
	id := o.lend.next
	o.lend.out[id] = lentSlice{key: op.Key, spec: sp, bucket: bucket, n: s, part: p, gen: gen, forget: mono + ttl + returnGrace}
	o.lend.mu.Unlock()
	return &counter.Lent{ID: id, N: s, TTL: ttl}
}

// takeBack takes a Return's units off the bucket its slice was added to, once, and
// answers how many it took (Count) and whether the slice was known (Existed).
func (o *Owner) takeBack(p int, op *counter.Op) counter.Result {
	o.lend.mu.Lock()
	s, ok := o.lend.out[op.SliceID]
	if !ok || s.key != op.Key || s.spec != spec(op) || s.part != p || op.N > s.n {
		o.lend.mu.Unlock()
		return counter.Result{}
	}
	if !mutate.On(mutate.ReturnTwice) {
		delete(o.lend.out, op.SliceID)
	}
	o.lend.back++
	o.lend.mu.Unlock()
	if o.parts.at(p).Gen != s.gen {
		return counter.Result{} // memory changed since it was lent: see the file's doc
	}
	return counter.Result{Count: o.cfg.Store.Take(op.Key, s.spec, s.bucket, op.N, o.cfg.Now()), Existed: true}
}

// forgetSlices drops the slices whose returns are no longer taken.
func (o *Owner) forgetSlices(now time.Duration) {
	o.lend.mu.Lock()
	defer o.lend.mu.Unlock()
	for id, s := range o.lend.out {
		if now > s.forget {
			delete(o.lend.out, id)
		}
	}
}

// SlicesLent is how many slices this node lent so far, and how many returns it took.
func (o *Owner) SlicesLent() (lent, returned uint64) {
	o.lend.mu.Lock()
	defer o.lend.mu.Unlock()
	return o.lend.lent, o.lend.back
}

// SlicesOut is how many slices this node lent whose returns it still takes.
func (o *Owner) SlicesOut() int {
	o.lend.mu.Lock()
	defer o.lend.mu.Unlock()
	return len(o.lend.out)
}

// SlicedKeys is the keys of the counters this node lent slices of whose returns it
// still takes.
func (o *Owner) SlicedKeys() map[string]bool {
	o.lend.mu.Lock()
	defer o.lend.mu.Unlock()
	out := make(map[string]bool, len(o.lend.out))
	for _, s := range o.lend.out {
		out[s.key] = true
	}
	return out
}
