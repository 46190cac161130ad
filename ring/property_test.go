package ring

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// seed returns LEAPCOUNT_SEED when set, so a failure can be replayed, else the clock.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("LEAPCOUNT_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LEAPCOUNT_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with LEAPCOUNT_SEED=%d)", s, s)
	return s
}

func randomMembers(rng *rand.Rand, n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("m%x", rng.Uint32()), RPCAddr: fmt.Sprintf("10.%d.%d.%d:7947", i/65536, i/256%256, i%256)}
	}
	return ms
}

func TestRandomizedProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0))
	for trial := range 60 {
		cfg := Config{Placement: Placement(1 + rng.IntN(2)), PartitionCount: 1 << rng.IntN(11), ReplicationFactor: 2 + rng.IntN(30), Load: 1.05 + rng.Float64()}
		// Up to 64 members: consistent rebuilds its ring per member added, so larger sets
		// cost quadratic time; TestBalanceWithinLoadBound covers the largest.
		n := rng.IntN(min(cfg.PartitionCount, 64) + 1)
		ms := randomMembers(rng, n)
		r := New(ms, cfg)
		if n > 0 && r.Err() != nil {
			t.Fatalf("trial %d %+v n=%d: %v", trial, cfg, n, r.Err())
		}
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := New(shuffled, cfg)
		if again.Epoch() != r.Epoch() || len(Moved(r, again)) != 0 {
			t.Fatalf("trial %d: placement depends on member order", trial)
		}
		checkPlacement(t, trial, r)
		if cfg.Placement == PlacementMatching && n > 0 {
			checkStable(t, fmt.Sprintf("trial %d %+v n=%d", trial, cfg, n), r)
		}
		checkMoved(t, trial, r, New(ms[:rng.IntN(n+1)], cfg))
	}
}

// checkPlacement: lookups agree, every owner is a member, shares respect the bound.
func checkPlacement(t *testing.T, trial int, r *Ring) {
	t.Helper()
	if r.Len() == 0 {
		return
	}
	bound := r.Config().MaxShare(r.Len())
	for name, s := range r.Shares() {
		if s > bound {
			t.Fatalf("trial %d: %s owns %d; want at most %d", trial, name, s, bound)
		}
	}
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		m, ok := r.Owner(key)
		po, _ := r.PartitionOwner(r.Partition(key))
		if !ok || m != po {
			t.Fatalf("trial %d: Owner(%q) = %v, %v; want %v", trial, key, m, ok, po)
		}
		if _, ok := r.Member(m.Name); !ok {
			t.Fatalf("trial %d: owner %q is not a member", trial, m.Name)
		}
	}
}

// checkMoved compares Moved with a brute-force diff.
func checkMoved(t *testing.T, trial int, prev, next *Ring) {
	t.Helper()
	moved := Moved(prev, next)
	for p := range next.PartitionCount() {
		a, aok := prev.PartitionOwner(p)
		b, bok := next.PartitionOwner(p)
		changed := aok != bok || a.Name != b.Name
		if _, in := slices.BinarySearch(moved, p); in != changed {
			t.Fatalf("trial %d: partition %d in Moved = %v; owner changed = %v", trial, p, in, changed)
		}
	}
}
