package node

import (
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base                int
		floor, mapped, live int64
		want                int
	}{
		{100, 0, 0, 4 * mib, 100},                   // nothing mapped: GOGC as started
		{100, 0, 32 * mib, 4 * mib, 100},            // a sixteenth of it is less than GOGC gives
		{100, 0, 1600 * mib, 10 * mib, 1000},        // the heap may grow by 100 MiB
		{200, 0, 1600 * mib, 10 * mib, 1000},        //
		{2000, 0, 1600 * mib, 10 * mib, 2000},       // GOGC as started gives more
		{100, 0, 1 << 40, 1 * mib, maxGCPercent},    //
		{100, 32 * mib, 0, 4 * mib, 800},            // a small store: the floor
		{100, 32 * mib, 32 * mib, 4 * mib, 800},     //
		{100, 32 * mib, 1600 * mib, 10 * mib, 1000}, // the store's share is more
		{100, 32 * mib, 0, 64 * mib, 100},           // GOGC as started gives more
		{100, 32 * mib, 0, 1024, maxGCPercent},      // capped
	} {
		if got := gcPercentFor(c.base, c.floor, c.mapped, c.live); got != c.want {
			t.Errorf("base %d, floor %d MiB, mapped %d MiB, live %d MiB: got GOGC %d; want %d", c.base, c.floor/mib, c.mapped/mib, c.live/mib, got, c.want)
		}
	}
}

func TestRateFloor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		allocs  uint64
		elapsed time.Duration
		most    int64
		want    int64
	}{
		{100 * mib, time.Second, 32 * mib, 25 * mib},  // a quarter second's allocations
		{1000 * mib, time.Second, 32 * mib, 32 * mib}, // at most most
		{0, time.Second, 32 * mib, 0},                 // idle: none
		{100 * mib, 0, 32 * mib, 0},                   // no time passed: none
		{100 * mib, time.Second, 0, 0},                // off
	} {
		if got := rateFloor(c.allocs, c.elapsed, c.most); got != c.want {
			t.Errorf("%d MiB in %v, most %d MiB: got %d; want %d", c.allocs/mib, c.elapsed, c.most/mib, got, c.want)
		}
	}
}
