package ring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/leapcount/leapcount/hashslot"
)

// Member is a node that can own partitions.
type Member struct {
	Name    string // unique member name; placement depends on it alone
	RPCAddr string // where peers send operations for keys this member owns
}

// String makes Member a consistent.Member: consistent names a member's virtual nodes
// String()+index, so the name ends with a separator, or "node-1" with index 10 and
// "node-11" with index 0 would be one virtual node, and members with such names would
// lose virtual nodes to each other (at 100 virtual nodes, some member of 64 named
// node-0…node-63 owned nothing; TestPlacementAtScale).
func (m Member) String() string { return m.Name + "/" }

// Ring is an immutable placement of partitions on members.
type Ring struct {
	cfg     Config
	members []Member // sorted by name, names unique
	owners  []int32  // partition → index into members; nil when the ring owns nothing
	epoch   uint64
	shift   int // slot >> shift is the slot's partition
	err     error
}

// New places PartitionCount partitions on members. The result depends on the set of
// members, not on their order; members with an empty name are ignored, and of several
// with one name the one with the smallest RPCAddr is kept. New never panics: when the
// partitions cannot be placed, the ring owns nothing and Err says why.
func New(members []Member, cfg Config) *Ring {
	cfg = cfg.withDefaults()
	r := &Ring{cfg: cfg, members: normalize(members)}
	if cfg.Validate() == nil {
		r.shift = cfg.slotShift()
	}
	r.epoch = epochOf(cfg, r.members)
	r.owners, r.err = place(r.members, cfg)
	return r
}

// normalize returns members sorted by name, without empty or repeated names.
func normalize(in []Member) []Member {
	out := make([]Member, 0, len(in))
	for _, m := range in {
		if m.Name != "" {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.RPCAddr, b.RPCAddr)
	})
	return slices.CompactFunc(out, func(a, b Member) bool { return a.Name == b.Name })
}

// place runs cfg's placement and flattens it into a table.
func place(members []Member, cfg Config) ([]int32, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, ErrNoMembers
	}
	if len(members) > cfg.PartitionCount {
		return nil, fmt.Errorf("ring: %d members exceed PartitionCount %d", len(members), cfg.PartitionCount)
	}
	if cfg.Placement == PlacementMatching {
		return matching(members, cfg.PartitionCount, cfg.MaxShare(len(members)))
	}
	c, err := build(members, cfg)
	if err != nil {
		return nil, err
	}
	owners := make([]int32, cfg.PartitionCount)
	for p := range owners {
		m, _ := c.GetPartitionOwner(p).(Member)
		i, found := slices.BinarySearchFunc(members, m.Name, func(e Member, name string) int {
			return strings.Compare(e.Name, name)
		})
		if !found {
			return nil, fmt.Errorf("ring: partition %d has no owner", p)
		}
		owners[p] = int32(i)
	}
	return owners, nil
}

// build calls consistent.New, turning its panic (the load bound cannot be met) into an
// error. The checks in place make that unreachable in practice; this is the backstop.
func build(members []Member, cfg Config) (c *consistent.Consistent, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("ring: cannot place %d members: %v", len(members), p)
		}
	}()
	cm := make([]consistent.Member, len(members))
	for i, m := range members {
		cm[i] = m
	}
	return consistent.New(cm, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	}), nil
}

// hasher is consistent's Hasher: xxhash64 of member and partition names.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// Partition returns the partition key belongs to: its Redis Cluster hash slot (package
// hashslot) divided by the slots per partition, so partition p holds the contiguous
// slots SlotRange(p) and keys with one {hash tag} share a partition. It needs no
// members, but a valid Config.
func (r *Ring) Partition(key string) int {
	return int(hashslot.Of(key)) >> r.shift
}

// PartitionBytes is Partition for a key held in a byte slice.
func (r *Ring) PartitionBytes(key []byte) int {
	return int(hashslot.Of(key)) >> r.shift
}

// SlotPartition is the partition of hash slot slot (a checked op's counter.Op.Slot):
// Partition without hashing the key again.
func (r *Ring) SlotPartition(slot uint16) int { return int(slot) >> r.shift }

// SlotRange returns the first and last hash slot of partition p.
func (r *Ring) SlotRange(p int) (first, last int) {
	return p << r.shift, (p+1)<<r.shift - 1
}

// Owner returns the member that owns key; ok is false when the ring owns nothing.
// It does not allocate.
func (r *Ring) Owner(key string) (m Member, ok bool) {
	if r.owners == nil {
		return Member{}, false
	}
	return r.members[r.owners[r.Partition(key)]], true
}

// OwnerBytes is Owner for a key held in a byte slice.
func (r *Ring) OwnerBytes(key []byte) (m Member, ok bool) {
	if r.owners == nil {
		return Member{}, false
	}
	return r.members[r.owners[r.PartitionBytes(key)]], true
}

// SlotOwner returns the member that owns hash slot slot (a checked op's
// counter.Op.Slot): Owner without hashing the key again.
func (r *Ring) SlotOwner(slot uint16) (m Member, ok bool) {
	if r.owners == nil {
		return Member{}, false
	}
	return r.members[r.owners[r.SlotPartition(slot)]], true
}

// PartitionOwner returns the owner of partition p; ok is false when p is out of range
// or the ring owns nothing.
func (r *Ring) PartitionOwner(p int) (m Member, ok bool) {
	if r.owners == nil || p < 0 || p >= len(r.owners) {
		return Member{}, false
	}
	return r.members[r.owners[p]], true
}
