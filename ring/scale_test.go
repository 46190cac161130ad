package ring

import (
	"testing"
	"time"
)

// TestPlacementAtScale reports, for clusters of 16, 32 and 64 members, the spread of
// partitions (and so of hash slots) over members, the share that moves when one member
// joins or leaves, and the build time; and checks the load bound and that a change
// moves a small share, nearly all of it to or from the member that changed.
func TestPlacementAtScale(t *testing.T) {
	for _, n := range []int{16, 32, 64} {
		ms := members(n)
		start := time.Now()
		r := New(ms, Config{})
		build := time.Since(start)
		lo, hi := r.PartitionCount(), 0
		for _, s := range r.Shares() {
			lo, hi = min(lo, s), max(hi, s)
		}
		avg := float64(r.PartitionCount()) / float64(n)
		if hi > r.Config().MaxShare(n) {
			t.Errorf("n=%d: a member owns %d partitions; the bound is %d", n, hi, r.Config().MaxShare(n))
		}
		join := New(append(members(n), Member{Name: "newcomer", RPCAddr: "10.9.9.9:7947"}), Config{})
		leave := New(ms[1:], Config{})
		jm, jOther := movedAround(r, join, "newcomer")
		lm, lOther := movedAround(r, leave, ms[0].Name)
		pc := float64(r.PartitionCount())
		t.Logf("n=%d: build %v; partitions per member %d..%d (avg %.1f, max/avg %.2f); join moves %.2f%% (%d not to the newcomer), leave %.2f%% (%d not from the leaver); 1/N = %.2f%%",
			n, build.Round(time.Microsecond), lo, hi, avg, float64(hi)/avg, 100*float64(jm)/pc, jOther, 100*float64(lm)/pc, lOther, 100/float64(n))
		for _, c := range []struct {
			what         string
			moved, other int
		}{{"join", jm, jOther}, {"leave", lm, lOther}} {
			if float64(c.moved)/pc > 1.3/float64(n) {
				t.Errorf("n=%d: a %s moves %d of %d partitions; want at most 1.3/N", n, c.what, c.moved, r.PartitionCount())
			}
		}
	}
}

// movedAround counts the partitions whose owner differs between a and b, and of those
// the ones that neither came from nor went to member.
func movedAround(a, b *Ring, member string) (moved, other int) {
	for _, p := range Moved(a, b) {
		moved++
		from, _ := a.PartitionOwner(p)
		to, _ := b.PartitionOwner(p)
		if from.Name != member && to.Name != member {
			other++
		}
	}
	return moved, other
}
