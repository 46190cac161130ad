package ring

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// Consistent builds, owner for owner and epoch for epoch, the ring releases before
// PlacementMatching built with Config{}: a cluster in a rolling upgrade places by it,
// and peers compare epochs on every forward. The figures were taken from the release
// before PlacementMatching (Config{} then meant this placement).
func TestConsistentIsTheOldPlacement(t *testing.T) {
	for _, want := range []struct {
		members       int
		epoch, owners uint64
	}{
		{1, 0xcdf6a5c35d421e37, 0x34052659fdeca7f9},
		{3, 0x1758c81a871ff528, 0xaed1e1a88b080f7a},
		{7, 0xd4290d222a22a12b, 0x7d653c8fc7680269},
		{64, 0x2a658f4a8017cce6, 0xf1c91f763f2be332},
	} {
		r := New(members(want.members), Consistent)
		if got := ownersDigest(r); r.Epoch() != want.epoch || got != want.owners {
			t.Errorf("%d members: epoch %#x, owners %#x; the old release's were %#x, %#x", want.members, r.Epoch(), got, want.epoch, want.owners)
		}
	}
	if New(members(3), Config{}).Epoch() == New(members(3), Consistent).Epoch() {
		t.Fatalf("the two placements share an epoch")
	}
}

// ownersDigest hashes every partition's owner's name, in partition order.
func ownersDigest(r *Ring) uint64 {
	var b []byte
	for p := range r.PartitionCount() {
		m, _ := r.PartitionOwner(p)
		b = binary.AppendUvarint(b, uint64(len(m.Name)))
		b = append(b, m.Name...)
	}
	return xxhash.Sum64(b)
}

// A matching placement is stable: no partition and member would both rather have each
// other than what they have. With strict preferences the partition-proposing stable
// matching is unique, so this is also what makes it independent of processing order.
func TestMatchingIsStable(t *testing.T) {
	for _, c := range []struct {
		members, partitions int
	}{{1, 64}, {2, 64}, {3, 4096}, {16, 4096}, {64, 4096}, {200, 4096}, {40, 64}, {64, 64}} {
		ms := members(c.members)
		for i := range ms {
			ms[i].Name = fmt.Sprintf("m-%d.example", i*7919%1000)
		}
		r := New(ms, Config{PartitionCount: c.partitions})
		if r.Err() != nil {
			t.Fatalf("%+v: %v", c, r.Err())
		}
		checkStable(t, fmt.Sprint(c), r)
	}
}

// checkStable fails t if some partition ranks a member above its owner while that
// member has room or holds a partition it ranks below this one.
func checkStable(t *testing.T, what string, r *Ring) {
	t.Helper()
	limit := r.Config().MaxShare(r.Len())
	seeds := make([]uint64, r.Len())
	for i, m := range r.members {
		seeds[i] = xxhash.Sum64String(m.Name)
	}
	held := make([]int, r.Len())
	worst := make([]held1, r.Len())
	for p, o := range r.owners {
		e := held1{score: score(seeds[o], int32(p)), partition: int32(p)}
		if held[o] == 0 || e.worse(worst[o]) {
			worst[o] = e
		}
		held[o]++
	}
	for p, o := range r.owners {
		own := choice{score: score(seeds[o], int32(p)), member: o}
		for m := range seeds {
			alt := choice{score: score(seeds[m], int32(p)), member: int32(m)}
			if !alt.better(own) {
				continue
			}
			if held[m] < limit || worst[m].worse(held1{score: alt.score, partition: int32(p)}) {
				t.Fatalf("%s: partition %d (of %s) and %s would rather have each other (%s holds %d of %d)",
					what, p, r.members[o].Name, r.members[m].Name, r.members[m].Name, held[m], limit)
			}
		}
	}
}
