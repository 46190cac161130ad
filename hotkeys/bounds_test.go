package hotkeys

import (
	"fmt"
	"testing"
)

// coverage observes every key of truth its number of times, interleaved, and reports
// the keys Top lists and how many of their ranges hold their true ops.
func coverage(t *testing.T, s *Sketch, truth map[string]uint64) (listed, held int, rep Report) {
	t.Helper()
	left := map[string]uint64{}
	for k, n := range truth {
		left[k] = n
	}
	for len(left) > 0 {
		for k := range left {
			s.Observe(k, 1000)
			if left[k]--; left[k] == 0 {
				delete(left, k)
			}
		}
	}
	rep = s.Top(len(truth), 1000)
	for _, h := range rep.Keys {
		listed++
		if want := truth[h.Key]; h.Low <= want && want <= h.High {
			held++
		}
		if h.Ops-min(h.Error, h.Ops) > h.Low || h.Ops+h.Error < h.High {
			t.Errorf("%s: ops %d ± %d does not cover [%d, %d]", h.Key, h.Ops, h.Error, h.Low, h.High)
		}
	}
	return listed, held, rep
}

// A key's range of ops holds its true count despite sampling: 28 true ops of a key,
// one in 16 sampled, are estimated as a multiple of 16 (often 32 or 48), which
// "± the sketch's error" (0 here: no key was replaced) never held. The ranges are 99%
// ones, so nearly all of 300 keys' hold their truth; a key with many ops gets a
// narrow one.
func TestRangeHoldsTheTrueCount(t *testing.T) {
	s := New(Config{Capacity: 1024, SampleEvery: 16})
	truth := map[string]uint64{"hot": 16_000}
	for i := range 300 {
		truth[fmt.Sprintf("k%d", i)] = 28
	}
	listed, held, rep := coverage(t, s, truth)
	if listed < 150 || held < listed*95/100 {
		t.Fatalf("%d of %d listed keys' ranges hold their true count; want at least 95%% of at least 150", held, listed)
	}
	hot := rep.Keys[0]
	if hot.Key != "hot" || hot.High-hot.Low > 16_000/5 {
		t.Fatalf("top key %+v; want hot, its range within a fifth of its 16000 ops", hot)
	}
}

// The range also covers the sketch's own error: over capacity, a key may hold counts
// inherited from the keys it replaced, and its range reaches down past them.
func TestRangeCoversTheSketchError(t *testing.T) {
	s := New(Config{Capacity: 8, SampleEvery: 16})
	truth := map[string]uint64{"a": 4000, "b": 3000, "c": 2000}
	for i := range 400 {
		truth[fmt.Sprintf("cold%d", i)] = 20
	}
	listed, held, rep := coverage(t, s, truth)
	inherited := false
	for _, h := range rep.Keys {
		inherited = inherited || h.inherited > 0
		if want := truth[h.Key]; (h.Key == "a" || h.Key == "b" || h.Key == "c") && (want < h.Low || want > h.High) {
			t.Errorf("%s: true %d outside [%d, %d]", h.Key, want, h.Low, h.High)
		}
	}
	if !inherited || held < listed*9/10 {
		t.Fatalf("%d of %d ranges hold the truth, inherited counts seen: %v; want 90%% and some", held, listed, inherited)
	}
}

// Without sampling the range is the sketch's alone: [count − error, count].
func TestRangeWithoutSampling(t *testing.T) {
	if lo, hi := opsRange(10, 3, 1); lo != 7 || hi != 10 {
		t.Fatalf("every op counted, 10 with 3 inherited: [%d, %d]; want [7, 10]", lo, hi)
	}
	if lo, hi := opsRange(0, 0, 16); lo != 0 || hi < 16*6 {
		t.Fatalf("no sample: [%d, %d]; want from 0 to more than 6 samples' worth", lo, hi)
	}
}
