package leaparray

import "fmt"

// Spec is the shape of a counter: its window and bucket count. Counters with the same
// key but another Spec are distinct.
type Spec struct {
	WindowMs int64
	Buckets  int
}

// MakeSpec checks a window and bucket count and returns their Spec. The bounds are the
// ring's own (positive, evenly divisible); the contract's tighter bounds are checked by
// the callers (package counter).
func MakeSpec(windowMs int64, buckets int) (Spec, error) {
	if windowMs <= 0 || buckets <= 0 || windowMs%int64(buckets) != 0 {
		return Spec{}, fmt.Errorf("leaparray: window %dms does not divide into %d buckets of at least 1ms", windowMs, buckets)
	}
	return Spec{WindowMs: windowMs, Buckets: buckets}, nil
}

// BucketMs is the length of one bucket, L.
func (s Spec) BucketMs() int64 { return s.WindowMs / int64(s.Buckets) }

// Bucket is the index of the bucket that contains the millisecond now: floor(now/L).
func (s Spec) Bucket(now int64) int64 { return floorDiv(now, s.BucketMs()) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// slot is where bucket j lives in a ring of b slots.
func slot(j int64, b int) int {
	s := int(j % int64(b))
	if s < 0 {
		s += b
	}
	return s
}
