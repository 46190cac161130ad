package leaparray

// The one-bucket form: a counter all of whose count is in its head bucket keeps only its
// head (bucket and sum), no ring. Most rate-limiter keys are touched once or twice in a
// window, so most counters live here; the second bucket a counter is added to within its
// window moves it into a ring (shard.widen). BenchmarkStoreMemory, touches=1, shows what
// it pays: the 40 bytes of a ten-bucket narrow ring per counter.
//
// The functions below are the ring functions of ring.go for a ring of b buckets that is
// zero but for its head bucket, whose count is h.sum; their callers likewise act at
// j >= h.bucket (but for addOne) and hold the shard's lock.

// staysOne reports whether adding n at bucket j keeps a one-bucket counter of b buckets
// in that form: j is its head bucket, or a bucket past its window (it counts for nothing,
// or it starts the window afresh), or the counter is empty and j moves its head forward,
// or the add is of nothing and does not move the head.
func staysOne(h *head, b int64, j int64, n uint64) bool {
	return j == h.bucket || j >= h.bucket+b || j <= h.bucket-b || (h.sum == 0 && j > h.bucket) || (n == 0 && j < h.bucket)
}

// addOne adds n at bucket j, for which staysOne holds, and returns the count at the head.
func addOne(h *head, j int64, n uint64) uint64 {
	switch {
	case j == h.bucket:
		h.sum += n
	case j > h.bucket: // what the head held has left the window, or there was nothing
		h.bucket, h.sum = j, n
	}
	return h.sum // older than the window, or nothing: dropped
}

// countOne is countAt: the head bucket counts until a whole window has passed it.
func countOne(h *head, b int64, j int64) uint64 {
	if j-h.bucket >= b {
		return 0
	}
	return h.sum
}

// allowOne is allowAt. Added at j, n keeps the counter in this form: the caller widened
// it first otherwise.
func allowOne(h *head, b int64, now, j, bucketMs int64, limit, n uint64) Decision {
	c := countOne(h, b, j)
	if admits(c, limit, n) {
		return allowed(addOne(h, j, n), limit)
	}
	d := denied(c, limit, n)
	if n > limit {
		return d
	}
	// Denied with n <= limit: the count is the head bucket's, and all of it leaves when
	// bucket head+b starts.
	d.RetryAfterMs = (h.bucket+b)*bucketMs - now
	return d
}

// unfold moves a one-bucket counter into a ring, a narrow one if its count fits, with
// what it has pending, and returns where it now is.
func (sh *shard) unfold(key string, h uint64, r ref) ref {
	hd := sh.one.heads.s[r.slot]
	var to ref
	if hd.sum <= uint64(^uint32(0)) {
		to = ref{tier: narrow, slot: sh.narrow.insert(key, h, hd.bucket)}
		rh, counts := sh.narrow.ring(to.slot)
		*rh, counts[slot(hd.bucket, len(counts))] = hd, uint32(hd.sum)
	} else {
		to = ref{tier: wide, slot: sh.wide.insert(key, h, hd.bucket)}
		rh, counts := sh.wide.ring(to.slot)
		*rh, counts[slot(hd.bucket, len(counts))] = hd, hd.sum
	}
	if sh.one.isWhole(r.slot) {
		sh.one.clearWhole(r.slot)
		sh.markWhole(to)
	}
	for _, b := range sh.one.takePending(r.slot) {
		sh.noteAdd(to, b.Index, b.Count)
	}
	sh.one.remove(r.slot, h)
	return to
}
