package node

import "testing"

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base         int
		mapped, live int64
		want         int
	}{
		{100, 0, 4 * mib, 100},             // nothing mapped: GOGC as started
		{100, 32 * mib, 4 * mib, 100},      // a sixteenth of it is less than GOGC gives
		{100, 1600 * mib, 10 * mib, 1000},  // the heap may grow by 100 MiB
		{200, 1600 * mib, 10 * mib, 1000},  //
		{2000, 1600 * mib, 10 * mib, 2000}, // GOGC as started gives more
		{100, 1 << 40, 1 * mib, maxGCPercent},
	} {
		if got := gcPercentFor(c.base, c.mapped, c.live); got != c.want {
			t.Errorf("base %d, mapped %d MiB, live %d MiB: got GOGC %d; want %d", c.base, c.mapped/mib, c.live/mib, got, c.want)
		}
	}
}
