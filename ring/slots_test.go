package ring

import (
	"testing"

	"github.com/leapcount/leapcount/hashslot"
)

// TestSlotRangesCoverEverySlotOnce: the ranges tile slots 0..16383 in order, adjacent
// ranges have different owners, and every slot's range names the owner Owner gives its
// keys.
func TestSlotRangesCoverEverySlotOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10, 64} {
		r := New(members(n), Config{})
		rs := r.SlotRanges()
		next := 0
		for i, sr := range rs {
			if sr.First != next || sr.Last < sr.First {
				t.Fatalf("n=%d: range %d is %d..%d; want it to start at %d", n, i, sr.First, sr.Last, next)
			}
			if i > 0 && rs[i-1].Owner.Name == sr.Owner.Name {
				t.Fatalf("n=%d: ranges %d and %d both belong to %s: want them merged", n, i-1, i, sr.Owner.Name)
			}
			for s := sr.First; s <= sr.Last; s++ {
				if m, _ := r.PartitionOwner(s / 4); m.Name != sr.Owner.Name {
					t.Fatalf("n=%d: slot %d in a range of %s; its partition's owner is %s", n, s, sr.Owner.Name, m.Name)
				}
			}
			next = sr.Last + 1
		}
		if next != hashslot.Count {
			t.Fatalf("n=%d: ranges end at %d; want %d", n, next, hashslot.Count)
		}
		if n == 1 && len(rs) != 1 {
			t.Fatalf("one member: %d ranges; want 1", len(rs))
		}
		t.Logf("n=%d: %d ranges", n, len(rs))
	}
	if rs := New(nil, Config{}).SlotRanges(); rs != nil {
		t.Fatalf("a ring with no members lists %d ranges; want none", len(rs))
	}
}
