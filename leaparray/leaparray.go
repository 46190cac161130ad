package leaparray

import "sync"

// LeapArray is one sliding-window counter, safe for use by many goroutines.
//
// It takes a mutex for every call instead of Sentinel's lock-free scheme. Sentinel
// publishes a stale bucket's new start time before zeroing its count, so an add that
// lands in between is wiped, and a reader can see the old count under the new start.
// Here the reset of a stale bucket and the add that caused it are one critical section,
// so no add is lost and no reader sees a half-reset bucket. An uncontended lock is
// cheap enough for our budget (BenchmarkLeapArrayAdd); the common case, an add to the
// head bucket, also skips both divisions.
type LeapArray struct {
	mu        sync.Mutex
	spec      Spec
	bucketMs  int64
	started   bool
	h         head
	headStart int64 // h.bucket · bucketMs: lets the hot path test "same bucket" without dividing
	headSlot  int
	counts    []uint64
}

// New returns an empty counter of the given shape.
func New(s Spec) (*LeapArray, error) {
	if _, err := MakeSpec(s.WindowMs, s.Buckets); err != nil {
		return nil, err
	}
	return &LeapArray{spec: s, bucketMs: s.BucketMs(), counts: make([]uint64, s.Buckets)}, nil
}

// Spec returns the counter's shape.
func (a *LeapArray) Spec() Spec { return a.spec }

// Add adds n (n <= 0 adds nothing) at time now and returns the count afterwards.
func (a *LeapArray) Add(now, n int64) int64 {
	if n < 0 {
		n = 0
	}
	a.mu.Lock()
	if a.started && uint64(now-a.headStart) < uint64(a.bucketMs) {
		a.counts[a.headSlot] += uint64(n)
		a.h.sum += uint64(n)
		c := a.h.sum
		a.mu.Unlock()
		return clampInt(c)
	}
	j := a.at(now)
	c := addAt(&a.h, a.counts, j, uint64(n))
	a.moved()
	a.mu.Unlock()
	return clampInt(c)
}

// Count returns the count at time now. It changes nothing.
func (a *LeapArray) Count(now int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return 0
	}
	if uint64(now-a.headStart) < uint64(a.bucketMs) {
		return clampInt(a.h.sum)
	}
	return clampInt(countAt(&a.h, a.counts, max(a.spec.Bucket(now), a.h.bucket)))
}

// Allow adds n at time now if the count plus n stays within limit, and says what it did.
func (a *LeapArray) Allow(now, limit, n int64) Decision {
	if n < 0 {
		n = 0
	}
	if limit < 0 {
		limit = 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started && n > limit { // denied, and an empty ring stays empty
		return Decision{Remaining: limit, RetryAfterMs: -1}
	}
	j := a.at(now)
	d := allowAt(&a.h, a.counts, now, j, a.bucketMs, uint64(limit), uint64(n))
	a.moved()
	return d
}

// Snapshot returns the counter's buckets within the window at time now, oldest first.
func (a *LeapArray) Snapshot(now int64) []Bucket {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return nil
	}
	return windowBuckets(appendBuckets(nil, &a.h, a.counts), max(a.spec.Bucket(now), a.h.bucket), a.spec.Buckets)
}

// Merge adds a snapshot's buckets to the counter, bucket by bucket.
func (a *LeapArray) Merge(buckets []Bucket) {
	if len(buckets) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		a.started = true
		a.h.bucket = newestBucket(buckets)
	}
	for _, b := range buckets {
		addAt(&a.h, a.counts, b.Index, b.Count)
	}
	a.moved()
}

// at is the bucket an operation at time now acts at: max(bucket(now), head). It starts
// an empty ring at that bucket.
func (a *LeapArray) at(now int64) int64 {
	j := a.spec.Bucket(now)
	if !a.started {
		a.started = true
		a.h.bucket = j
		return j
	}
	return max(j, a.h.bucket)
}

// moved refreshes the hot-path cache after the head may have moved.
func (a *LeapArray) moved() {
	a.headStart = a.h.bucket * a.bucketMs
	a.headSlot = slot(a.h.bucket, len(a.counts))
}

// windowBuckets keeps the buckets in the window at bucket j: j−n < index <= j.
func windowBuckets(bs []Bucket, j int64, n int) []Bucket {
	out := bs[:0]
	for _, b := range bs {
		if b.Index > j-int64(n) && b.Index <= j {
			out = append(out, b)
		}
	}
	return out
}

func newestBucket(bs []Bucket) int64 {
	j := bs[0].Index
	for _, b := range bs[1:] {
		j = max(j, b.Index)
	}
	return j
}
