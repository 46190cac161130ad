package fallback

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// Counts near 2^62 (limits go to 2^62, counts to 2^63−1) are exact through every
// script, as in memory: Lua's doubles, which step by 1024 there, must never hold them.
func TestExactCountsNear2to62(t *testing.T) {
	srv, st := startStore(t)
	mem := newMem()
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	j := sp.Bucket(now)
	const p62 = uint64(1) << 62
	same := func(what string) {
		t.Helper()
		got, err := st.Load(bg, "big", sp, now)
		if want := mem.Snapshot("big", sp, now); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: Load = %v (%v); want %v", what, got, err, want)
		}
		c, err := st.Count(bg, "big", sp, now)
		if want := mem.Count("big", sp, now); err != nil || c != want {
			t.Fatalf("%s: Count = %d (%v); want %d", what, c, err, want)
		}
	}
	merge := []leaparray.Bucket{{Index: j - 2, Count: p62 + 1}, {Index: j - 1, Count: p62/2 + 3}, {Index: j, Count: 7}, {Index: j, Count: 2}}
	mem.Merge("big", sp, merge)
	if err := st.Merge(bg, "big", sp, merge, now); err != nil {
		t.Fatal(err)
	}
	same("merge")
	if c, err := st.Incr(bg, "big", sp, 1, now); err != nil || c != mem.Incr("big", sp, 1, now) || c != int64(p62+p62/2+14) {
		t.Fatalf("Incr = %d (%v); want %d", c, err, p62+p62/2+14)
	}
	same("incr")
	c := mem.Count("big", sp, now)
	for _, a := range []struct{ limit, n int64 }{
		{c + 1, 2}, {c + 2, 2} /* allowed: exactly at the limit */, {c + 3, 1}, {math.MaxInt64, 1}, {counter.MaxLimit, 1},
	} {
		got, err := st.Allow(bg, "big", sp, a.limit, a.n, now)
		if want := mem.Allow("big", sp, a.limit, a.n, now); err != nil || got != want {
			t.Fatalf("Allow(limit %d, n %d) = %+v (%v); want %+v", a.limit, a.n, got, err, want)
		}
	}
	same("allow")
	now += 8 * sp.BucketMs() // bucket j-2 leaves the window; j-1 leaves with the next
	for _, a := range []struct{ limit, n int64 }{{int64(p62/2 + 15), 3}, {int64(p62/2 + 15), 2}} {
		got, err := st.Allow(bg, "big", sp, a.limit, a.n, now)
		if want := mem.Allow("big", sp, a.limit, a.n, now); err != nil || got != want {
			t.Fatalf("Allow(limit %d, n %d) after a move = %+v (%v); want %+v", a.limit, a.n, got, err, want)
		}
	}
	same("allow after the head moved")
	// Write-behind: a reset and a count of 2^63−1, exactly.
	top := []leaparray.Bucket{{Index: sp.Bucket(now), Count: math.MaxInt64}}
	if err := st.SendBatch(bg, st.NewBatch("t6", []Delta{{Key: "big", Spec: sp, Buckets: top, Reset: true}})); err != nil {
		t.Fatal(err)
	}
	mem.Reset("big", sp, now)
	mem.Merge("big", sp, top)
	same("reset and merge of 2^63-1")
	// Past 2^63−1 a write fails before it writes anything.
	if _, err := st.Incr(bg, "big", sp, 1, now); err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("Incr past 2^63-1: %v; want an overflow error", err)
	}
	err := st.Merge(bg, "big", sp, []leaparray.Bucket{{Index: sp.Bucket(now) + 1, Count: 1}}, now)
	if err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Fatalf("Merge past 2^63-1: %v; want an overflow error", err)
	}
	same("failed writes")
	if f := srv.Client(t).HGetAll(bg, counterKey("big", sp)).Val(); len(f) != 3 {
		t.Fatalf("hash after failed writes: %v; want h, s and one bucket", f)
	}
	var fe *FlushError
	if err := sendOnce(st, []Delta{{Key: "big", Spec: sp, Buckets: []leaparray.Bucket{{Index: 1, Count: 1 << 63}}}}); !errors.As(err, &fe) ||
		!errors.Is(err, counter.ErrBadArgument) {
		t.Fatalf("a count of 2^63: %v; want ErrBadArgument", err)
	}
}

// Counts a script holds as Lua numbers (up to 15 digits) whose sums pass 2^53 stay
// exact: ten buckets of 10^15-1 sum to about 10^16, and the sum of those that leave the
// window as the head moves too.
func TestExactSumsPast2to53(t *testing.T) {
	_, st := startStore(t)
	mem := newMem()
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	j := sp.Bucket(now)
	var bs []leaparray.Bucket
	for k := range int64(10) {
		bs = append(bs, leaparray.Bucket{Index: j - 9 + k, Count: 999_999_999_999_999 - uint64(k)})
	}
	mem.Merge("k", sp, bs)
	if err := st.Merge(bg, "k", sp, bs, now); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{now, now + 4*sp.BucketMs()} {
		if c, err := st.Incr(bg, "k", sp, 3, at); err != nil || c != mem.Incr("k", sp, 3, at) {
			t.Fatalf("Incr at %d = %d (%v); want %d", at, c, err, mem.Count("k", sp, at))
		}
		got, err := st.Load(bg, "k", sp, at)
		if want := mem.Snapshot("k", sp, at); err != nil || !slices.Equal(got, want) {
			t.Fatalf("Load at %d = %v (%v); want %v", at, got, err, want)
		}
		if c, err := st.Count(bg, "k", sp, at); err != nil || c != mem.Count("k", sp, at) {
			t.Fatalf("Count at %d = %d (%v); want %d", at, c, err, mem.Count("k", sp, at))
		}
	}
}
