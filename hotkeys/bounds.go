package hotkeys

import "math"

// The range of a key's true ops. Its estimate, Ops, is the number of its ops that were
// sampled, c, times SampleEvery, S. Two things make it differ from the truth: the
// sketch may have counted in c up to e samples of keys it replaced (the true sampled
// count is in [c−e, c]), and sampling itself: of T ops, each counted with probability
// 1/S, the number counted is binomial, close to Poisson with mean T/S. Given k counted,
// the mean lies, with confidence about 99%, in the Poisson score interval
//
//	k + z²/2 ± z·√(k + z²/4)
//
// (the means m with (k−m)²/m ≤ z²), z = 2.576. It keeps its coverage for small k,
// where k ± z·√k does not (k = 0 gives [0, z²], not [0, 0]). With 28 true ops and
// S = 16, two samples are likely: an estimate of 32 ops whose range runs from 6 to
// 164, not "32 ± 0".

// sampleZ is the normal quantile of the range's confidence (99%, two-sided).
const sampleZ = 2.576

// opsRange is the range of true ops of a key counted c times, e of which may be
// inherited, with one op in every counted.
func opsRange(c, e uint64, every uint32) (low, high uint64) {
	if every <= 1 { // every op counted: the sketch's error alone
		return c - e, c
	}
	s := float64(every)
	lo, _ := poissonRange(float64(c - e))
	_, hi := poissonRange(float64(c))
	return uint64(math.Floor(lo * s)), uint64(math.Ceil(hi * s))
}

// poissonRange is the score interval of a Poisson mean, given k.
func poissonRange(k float64) (lo, hi float64) {
	z2 := sampleZ * sampleZ
	mid, half := k+z2/2, sampleZ*math.Sqrt(k+z2/4)
	return max(mid-half, 0), mid + half
}
