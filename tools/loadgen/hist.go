package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Hist is a log-linear histogram of durations in nanoseconds, as HdrHistogram keeps
// them: exact below 64 ns, then 32 buckets per power of two, so a quantile is within
// 1/32 (3%) of the true value, from 1 ns to hours, in a fixed 15 KiB array. Recording
// is an index computation and an increment: no allocation, no lock (each connection
// has its own, merged at the end).
type Hist struct {
	counts [histBuckets]uint64
	total  uint64
	max    int64
}

const (
	subBits     = 5 // 2^5 = 32 sub-buckets per power of two
	subCount    = 1 << subBits
	histBuckets = (64-subBits)*subCount + subCount
)

// index is the bucket of v >= 0: v itself below 2·subCount; above, the power of two
// (shift) and the top subBits+1 bits of v.
func index(v int64) int {
	u := uint64(v)
	if u < 2*subCount {
		return int(u)
	}
	shift := bits.Len64(u) - subBits - 1
	return shift*subCount + int(u>>uint(shift))
}

// bounds are the smallest and largest value of bucket i.
func bounds(i int) (lo, hi int64) {
	if i < 2*subCount {
		return int64(i), int64(i)
	}
	shift := i/subCount - 1
	m := int64(i%subCount + subCount)
	return m << uint(shift), (m+1)<<uint(shift) - 1
}

// Record adds one duration (negative ones count as 0).
func (h *Hist) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[index(v)]++
	h.total++
	h.max = max(h.max, v)
}

// Merge adds o's counts to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// Count is the number of durations recorded.
func (h *Hist) Count() uint64 { return h.total }

// Max is the largest duration recorded.
func (h *Hist) Max() time.Duration { return time.Duration(h.max) }

// Quantile is the duration at or below which a fraction q of the recorded ones lie:
// the largest value of the bucket holding the ceil(q·count)-th smallest (capped at the
// largest recorded), so it errs high by at most a bucket's width. It is 0 when the
// histogram is empty.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			_, hi := bounds(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}
