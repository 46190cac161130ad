package faultload

import (
	"context"
	"fmt"
)

// Report compares the counts read from a cluster with the tallies of a Gen.
//
// For each key, want = base + acked: a count below it lost acknowledged increments.
// Increments whose outcome is unknown (no answer, or an "outcome unknown" error) may or
// may not have counted, so a count in (want, want + unknown] is uncertain, not wrong;
// above that, the cluster counted increments that failed (an error that says the op
// was not applied) or were never sent, or counted one twice (extra). This is the
// checker's rule: acked − allowed loss ≤ final ≤ acked + unknown.
type Report struct {
	Keys      int
	Acked     int64 // sum of want (base + acked) over the keys
	Final     int64 // sum of the counts read
	Exact     int   // keys whose count is want
	LostKeys  int   // keys whose count is below want
	Lost      int64 // sum of want − count over those keys
	Uncertain int64 // increments counted though not acknowledged (unknown ones)
	ExtraKeys int   // keys counted above want + unknown
	Extra     int64 // sum of count − (want + unknown) over those keys
	Examples  []string
}

// OK reports whether nothing was lost and nothing invented.
func (r Report) OK() bool { return r.LostKeys == 0 && r.ExtraKeys == 0 }

func (r Report) String() string {
	s := fmt.Sprintf("keys %d: acked %d, final %d, lost %d (%d keys), extra %d (%d keys), uncertain %d, exact keys %d",
		r.Keys, r.Acked, r.Final, r.Lost, r.LostKeys, r.Extra, r.ExtraKeys, r.Uncertain, r.Exact)
	for _, e := range r.Examples {
		s += "\n\t" + e
	}
	return s
}

// Compare checks counts (indexed like tallies.Keys) against base (the counts at the
// start, nil for zeros) plus tallies (what the generator did since).
func Compare(counts []int64, tallies Counts, base []int64) Report {
	r := Report{Keys: len(tallies.Keys)}
	for i, key := range tallies.Keys {
		want := tallies.Acked[i]
		if base != nil {
			want += base[i]
		}
		upper := want + tallies.Unknown[i]
		got := counts[i]
		r.Acked += want
		r.Final += got
		var ex string
		switch {
		case got == want:
			r.Exact++
		case got < want:
			r.LostKeys++
			r.Lost += want - got
			ex = fmt.Sprintf("%s: count %d; want %d (lost %d)", key, got, want, want-got)
		case got <= upper:
			r.Uncertain += got - want
		default:
			r.ExtraKeys++
			r.Extra += got - upper
			ex = fmt.Sprintf("%s: count %d; want %d, at most %d with unknown outcomes", key, got, want, upper)
		}
		if ex != "" && len(r.Examples) < 5 {
			r.Examples = append(r.Examples, ex)
		}
	}
	return r
}

// Check reads every key's count through c and compares it (Compare). It returns the
// counts read too, to serve as the next step's base.
func Check(ctx context.Context, c Counter, tallies Counts, base []int64, window string) (Report, []int64, error) {
	counts, err := c.Counts(ctx, tallies.Keys, window)
	if err != nil {
		return Report{}, nil, err
	}
	return Compare(counts, tallies, base), counts, nil
}

// Disagree counts the keys whose counts differ between two nodes' answers and
// describes the first few.
func Disagree(keys []string, a, b []int64) (int, []string) {
	n := 0
	var ex []string
	for i := range keys {
		if a[i] != b[i] {
			n++
			if len(ex) < 5 {
				ex = append(ex, fmt.Sprintf("%s: %d vs %d", keys[i], a[i], b[i]))
			}
		}
	}
	return n, ex
}
