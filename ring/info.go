package ring

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Err is nil when the ring places every partition; otherwise it says why the ring owns
// nothing (ErrNoMembers, too many members, an invalid Config).
func (r *Ring) Err() error { return r.err }

// Config returns the Config the ring was built with, defaults filled in.
func (r *Ring) Config() Config { return r.cfg }

// PartitionCount is the number of partitions keys hash into.
func (r *Ring) PartitionCount() int { return r.cfg.PartitionCount }

// Len is the number of members, after dropping empty and repeated names.
func (r *Ring) Len() int { return len(r.members) }

// Members returns a copy of the members, sorted by name.
func (r *Ring) Members() []Member { return append([]Member(nil), r.members...) }

// Member returns the member with the given name.
func (r *Ring) Member(name string) (Member, bool) {
	for _, m := range r.members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Epoch names the placement: a hash of the Config and the sorted members' names and
// RPC addresses. Equal member sets under equal Configs give equal epochs, whatever
// order the members came in; any other difference almost surely gives another epoch.
func (r *Ring) Epoch() uint64 { return r.epoch }

// Shares returns how many partitions each member owns, with an entry (maybe 0) for
// every member. It is empty when the ring owns nothing.
func (r *Ring) Shares() map[string]int {
	shares := make(map[string]int, len(r.members))
	if r.owners == nil {
		return shares
	}
	for _, m := range r.members {
		shares[m.Name] = 0
	}
	for _, i := range r.owners {
		shares[r.members[i].Name]++
	}
	return shares
}

// epochOf hashes what decides placement and routing. Every string is length-prefixed,
// so no two different member lists encode to the same bytes.
func epochOf(cfg Config, members []Member) uint64 {
	buf := make([]byte, 0, 64+32*len(members))
	if cfg.Placement == PlacementConsistent {
		// As releases before PlacementMatching hash it: their epochs travel with
		// every forward, and a mixed cluster places by PlacementConsistent.
		buf = append(buf, "leapcount/ring/v1"...)
		buf = binary.AppendUvarint(buf, uint64(cfg.PartitionCount))
		buf = binary.AppendUvarint(buf, uint64(cfg.ReplicationFactor))
	} else {
		buf = append(buf, "leapcount/ring/v2"...)
		buf = append(buf, byte(cfg.Placement))
		buf = binary.AppendUvarint(buf, uint64(cfg.PartitionCount))
	}
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(cfg.Load))
	buf = binary.AppendUvarint(buf, uint64(len(members)))
	for _, m := range members {
		buf = appendString(buf, m.Name)
		buf = appendString(buf, m.RPCAddr)
	}
	return xxhash.Sum64(buf)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// Moved returns, in increasing order, the partitions whose owner (by name) differs
// between prev and next, counting "no owner" as an owner: the partitions a release
// must look at. A nil ring counts as one that owns nothing. When the partition counts
// differ, keys map to other partitions altogether, so every partition of next is
// returned.
func Moved(prev, next *Ring) []int {
	var count int
	switch {
	case next != nil:
		count = next.cfg.PartitionCount
	case prev != nil:
		count = prev.cfg.PartitionCount
	}
	if prev != nil && next != nil && prev.cfg.PartitionCount != next.cfg.PartitionCount {
		all := make([]int, count)
		for p := range all {
			all[p] = p
		}
		return all
	}
	var moved []int
	for p := range count {
		if ownerName(prev, p) != ownerName(next, p) {
			moved = append(moved, p)
		}
	}
	return moved
}

// ownerName is the owner's name, or "" (never a member's name) for no owner.
func ownerName(r *Ring, p int) string {
	if r == nil {
		return ""
	}
	m, _ := r.PartitionOwner(p)
	return m.Name
}
