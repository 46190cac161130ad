package rlqs

import (
	"math"
	"time"
)

// tokenBucket is an assignment as Envoy's filter enforces it: a bucket of Max tokens,
// full when it arrives, refilled continuously at PerFill every Fill. Envoy computes
// its rate as tokens over whole seconds of fill_interval, so Fill is a whole number
// of seconds.
type tokenBucket struct {
	Max     uint32        // max_tokens
	PerFill uint32        // tokens_per_fill
	Fill    time.Duration // fill_interval, whole seconds
}

// rate is the bucket's tokens per second.
func (b tokenBucket) rate() float64 { return float64(b.PerFill) / b.Fill.Seconds() }

// potential bounds what an Envoy may admit under b over d: a full bucket, then its
// refill.
func (b tokenBucket) potential(d time.Duration) float64 {
	return float64(b.Max) + b.rate()*d.Seconds()
}

// burst is the part of a second's tokens a bucket holds at most: every new bucket
// arrives full, and its fill is paid for again, so a small one makes a change cheap;
// a quarter second still lets requests come in bursts.
const burst = 4

// bucketFor is the bucket of at most rate tokens a second (at least one token every
// maxFill): whole tokens each second, or, below one a second, one token every whole
// number of seconds. ok is false when even that is more than rate allows.
func bucketFor(rate float64, maxFill time.Duration) (tokenBucket, bool) {
	if rate >= 1 {
		per := uint32(min(math.Floor(rate), math.MaxUint32))
		return tokenBucket{Max: max(1, (per+burst-1)/burst), PerFill: per, Fill: time.Second}, true
	}
	if rate <= 0 {
		return tokenBucket{}, false
	}
	secs := math.Ceil(1 / rate)
	if time.Duration(secs)*time.Second > maxFill {
		return tokenBucket{}, false
	}
	return tokenBucket{Max: 1, PerFill: 1, Fill: time.Duration(secs) * time.Second}, true
}

// near reports whether a and b differ by at most a twentieth of the larger rate, or a
// token a second: a change that small is not worth a new bucket (which Envoy fills
// anew, a burst that is paid for again).
func near(a, b tokenBucket) bool {
	ra, rb := a.rate(), b.rate()
	return math.Abs(ra-rb) <= max(0.05*max(ra, rb), 1)
}

// envoyKeeps reports whether Envoy's filter would keep a's bucket when sent b: it
// compares max_tokens, tokens_per_fill and only the nanoseconds of fill_interval, so
// one token every 2 s and one every 5 s are the same bucket to it. Such a change is
// not sent: the bucket in force is renewed, and paid for, as it is.
func envoyKeeps(a, b tokenBucket) bool {
	return a.Max == b.Max && a.PerFill == b.PerFill && a.Fill%time.Second == b.Fill%time.Second
}
