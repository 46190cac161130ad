package leaparray

// The ring algorithm, written once over plain memory so that both the standalone
// LeapArray and the store's slabs run the same code. Callers hold whatever lock guards
// the memory; nothing here is safe for concurrent use on its own.
//
// A ring is a head (the newest bucket added to), the running sum of its buckets, and
// B counts: counts[slot(j)] holds bucket j for head−B < j ≤ head. Older buckets are
// zeroed as the head moves, which keeps the invariant and keeps sum exact.

// count is a bucket's counter type: uint32 in the store's narrow slabs (half the memory
// for the common case), uint64 where a bucket outgrew that.
type count interface{ ~uint32 | ~uint64 }

// head is the per-counter scalar state of a ring.
type head struct {
	bucket int64  // newest bucket added to
	sum    uint64 // sum of the B buckets up to bucket
}

// advance moves the head forward to bucket j (j > h.bucket), clearing the buckets that
// leave the window. It touches at most B slots however far time jumped.
func advance[C count](h *head, counts []C, j int64) {
	b := int64(len(counts))
	if j-h.bucket >= b {
		clear(counts)
		h.sum = 0
	} else {
		for k, s := h.bucket+1, slot(h.bucket+1, len(counts)); k <= j; k, s = k+1, next(s, len(counts)) {
			h.sum -= uint64(counts[s])
			counts[s] = 0
		}
	}
	h.bucket = j
}

// fits reports whether n more in bucket j (j within the ring after advancing) stays
// within C. Callers that get false move the counter to wider counts first.
func fits[C count](h *head, counts []C, j int64, n uint64) bool {
	max := uint64(^C(0))
	if j > h.bucket-int64(len(counts)) && j <= h.bucket {
		return n <= max-uint64(counts[slot(j, len(counts))])
	}
	return n <= max // the bucket is new or will be cleared
}

// addAt adds n to bucket j and returns the count at the head afterwards. Bucket j is
// moved to (j > head), added in place (within the window), or dropped (older than the
// window: it counts for nothing at the head). Callers check fits first.
func addAt[C count](h *head, counts []C, j int64, n uint64) uint64 {
	if j > h.bucket {
		advance(h, counts, j)
	}
	if j > h.bucket-int64(len(counts)) {
		counts[slot(j, len(counts))] += C(n)
		h.sum += n
	}
	return h.sum
}

// countAt is the count at bucket j, which callers clamp to j >= head. It does not change
// the ring: buckets that left the window are subtracted, not cleared.
func countAt[C count](h *head, counts []C, j int64) uint64 {
	gone := j - h.bucket
	if gone <= 0 {
		return h.sum
	}
	if gone >= int64(len(counts)) {
		return 0
	}
	// The buckets that left are the oldest gone ones: slots from the one after the head on.
	sum := h.sum
	for k, s := int64(0), next(slot(h.bucket, len(counts)), len(counts)); k < gone; k, s = k+1, next(s, len(counts)) {
		sum -= uint64(counts[s])
	}
	return sum
}

// Decision is what allow answered.
type Decision struct {
	Allowed      bool
	Count        int64 // the count after the decision
	Remaining    int64 // max(0, limit − Count)
	RetryAfterMs int64 // 0 when allowed; −1 when n > limit; else the wait until allowed
}

// allowAt decides allow(limit, n) at time now (bucket j = max(bucket(now), head)) and adds
// n when allowed. bucketMs is L. Callers check fits first.
func allowAt[C count](h *head, counts []C, now, j, bucketMs int64, limit, n uint64) Decision {
	c := countAt(h, counts, j)
	if admits(c, limit, n) {
		return allowed(addAt(h, counts, j, n), limit)
	}
	d := denied(c, limit, n)
	if n > limit {
		return d
	}
	// Walk forward bucket by bucket: at bucket j+k the buckets up to j−B+k have left.
	// Within B steps everything has left and the count is 0 <= limit−n, so this ends.
	b := int64(len(counts))
	for k := int64(1); k <= b; k++ {
		old := j - b + k // the bucket that leaves when bucket j+k starts
		if old > h.bucket-b && old <= h.bucket {
			c -= uint64(counts[slot(old, len(counts))])
		}
		if c+n <= limit {
			d.RetryAfterMs = (j+k)*bucketMs - now
			break
		}
	}
	return d
}

// admits says whether allow(limit, n) admits n at count c.
func admits(c, limit, n uint64) bool { return c+n <= limit && c+n >= c }

// allowed is the Decision of an admitting allow, c the count after adding.
func allowed(c, limit uint64) Decision {
	return Decision{Allowed: true, Count: clampInt(c), Remaining: clampInt(limit - c)}
}

// denied is the Decision of a denying allow at count c, but for when to retry (−1 when
// n > limit: never).
func denied(c, limit, n uint64) Decision {
	d := Decision{Count: clampInt(c)}
	if c < limit {
		d.Remaining = clampInt(limit - c)
	}
	if n > limit {
		d.RetryAfterMs = -1
	}
	return d
}

// next is the slot after s, without the division slot needs.
func next(s, b int) int {
	if s++; s == b {
		return 0
	}
	return s
}

func clampInt(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// Bucket is one bucket of a counter's snapshot.
type Bucket struct {
	Index int64  // bucket index j: the bucket covers [j·L, (j+1)·L)
	Count uint64 // what was added to it
}

// appendBuckets appends the ring's non-zero buckets, oldest first.
func appendBuckets[C count](dst []Bucket, h *head, counts []C) []Bucket {
	b := int64(len(counts))
	for k := h.bucket - b + 1; k <= h.bucket; k++ {
		if c := counts[slot(k, len(counts))]; c != 0 {
			dst = append(dst, Bucket{Index: k, Count: uint64(c)})
		}
	}
	return dst
}
