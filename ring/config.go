package ring

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/leapcount/leapcount/hashslot"
)

// Defaults for Config. They must be the same on every node of a cluster.
const (
	// DefaultPartitionCount groups Redis Cluster's 16384 hash slots by 4 contiguous
	// slots: a key's partition is its slot / 4 (see Ring.Partition). With 1024 partitions
	// a 64-member cluster had 16 partitions a member, too few for the placement to even
	// out, and a join moved far more than 1/N of them; 4096 even the shares and move
	// about 1/N for 16-64 members (TestPlacementAtScale), keep the owner table, the
	// lease sets (512 bytes) and CLUSTER SLOTS (at most 4096 ranges) small, and cap a
	// cluster at 4096 members. 16384 (one a slot) moves closer to 1/N at 64 members
	// for four times those (node --partitions).
	DefaultPartitionCount = 4096
	// DefaultReplicationFactor is the number of virtual nodes per member under
	// PlacementConsistent. 200 evens the shares far better than 20 and keeps a join's
	// moves near 1/N; it costs build time, members × factor hashes and a sort, on a
	// membership change only (BenchmarkNew times the build).
	DefaultReplicationFactor = 200
	// DefaultLoad bounds a member's share under PlacementMatching at 1.1 times the
	// average: floor(P·Load/M) partitions (at least ceil(P/M), which any placement
	// needs). Lower evens the load but moves more partitions between surviving members
	// when one joins or leaves, as more members sit at the bound; it must stay above 1.
	DefaultLoad = 1.1
	// ConsistentLoad is the default Load under PlacementConsistent, the bound releases
	// before PlacementMatching used: their rings must come out the same.
	ConsistentLoad = 1.25
)

// Placement names the algorithm that spreads partitions over members. Every node of
// a cluster must use the same one; a node that supports PlacementMatching falls back
// to PlacementConsistent while any member does not (see node.placementFor).
type Placement uint8

// The placements. The zero value means the default, PlacementMatching.
const (
	// PlacementMatching is a stable matching of partitions to members under a load
	// bound: each partition ranks members by a rendezvous hash of (member, partition),
	// each member keeps the partitions that rank it highest by that same hash, up to
	// MaxShare (partition-proposing deferred acceptance; the result is unique, so it
	// does not depend on the order partitions are processed in).
	PlacementMatching Placement = iota + 1
	// PlacementConsistent is consistent hashing with bounded loads
	// (github.com/buraksezer/consistent): releases before PlacementMatching place with
	// it, and a cluster that still has such a member keeps to it.
	PlacementConsistent
)

func (p Placement) String() string {
	switch p {
	case PlacementMatching:
		return "matching"
	case PlacementConsistent:
		return "consistent"
	}
	return fmt.Sprintf("Placement(%d)", uint8(p))
}

// Config tunes placement. The zero value means the defaults.
type Config struct {
	Placement         Placement // the algorithm; 0 means PlacementMatching
	PartitionCount    int       // partitions the 16384 hash slots are grouped into (a power of two); also the most members a ring can place
	ReplicationFactor int       // virtual nodes per member on the hash ring (PlacementConsistent only); at least 2
	Load              float64   // bounds a member's share at about Load times the average (MaxShare); must be > 1
}

// Consistent is the Config of releases before PlacementMatching, defaults spelled out:
// a ring built with it is the one such a release builds from the same members, with
// the same Epoch.
var Consistent = Config{Placement: PlacementConsistent, PartitionCount: DefaultPartitionCount, ReplicationFactor: DefaultReplicationFactor, Load: ConsistentLoad}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	if c.Placement == 0 {
		c.Placement = PlacementMatching
	}
	if c.PartitionCount == 0 {
		c.PartitionCount = DefaultPartitionCount
	}
	if c.ReplicationFactor == 0 && c.Placement == PlacementConsistent {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
		if c.Placement == PlacementConsistent {
			c.Load = ConsistentLoad
		}
	}
	return c
}

// Validate reports the first field, after defaults, that cannot work, naming it.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Placement != PlacementMatching && c.Placement != PlacementConsistent:
		return fmt.Errorf("ring: Placement %v unknown", c.Placement)
	case c.PartitionCount < 1 || c.PartitionCount > hashslot.Count || c.PartitionCount&(c.PartitionCount-1) != 0:
		return fmt.Errorf("ring: PartitionCount %d: want a power of two from 1 to %d (slots are grouped evenly)", c.PartitionCount, hashslot.Count)
	case c.Placement == PlacementConsistent && (c.ReplicationFactor < 2 || c.ReplicationFactor > 1000):
		// consistent's bounded-load walk looks at all virtual nodes but one, so with
		// one per member it can miss the only member with room, and panic.
		return fmt.Errorf("ring: ReplicationFactor %d out of range [2, 1000]", c.ReplicationFactor)
	case math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load <= 1:
		return fmt.Errorf("ring: Load %v must be a finite number above 1", c.Load)
	}
	return nil
}

// ErrNoMembers is Err for a ring built from no members.
var ErrNoMembers = errors.New("ring: no members")

// MaxShare is the most partitions one member may own in a ring of members members. For
// PlacementMatching it is floor(P·Load/M), or ceil(P/M) if more: it steps by one as a
// member joins or leaves, where ceil(floor(P/M)·Load) can step by two and make more
// members at the bound shed or take back partitions (at 64 members a leave moved
// 1.33/N of the partitions against 1.20/N: TestPlacementAtScale). For
// PlacementConsistent it is the bound consistent enforces, ceil(floor(P/M)·Load). It
// is 0 when members is 0.
func (c Config) MaxShare(members int) int {
	c = c.withDefaults()
	if members <= 0 {
		return 0
	}
	if c.Placement == PlacementMatching {
		return max((c.PartitionCount+members-1)/members, int(float64(c.PartitionCount)*c.Load/float64(members)))
	}
	return int(math.Ceil(float64(c.PartitionCount/members) * c.Load))
}

// slotShift is how far a slot is shifted right to give its partition.
func (c Config) slotShift() int {
	return bits.TrailingZeros(uint(hashslot.Count / c.PartitionCount))
}
