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
	// cluster at 4096 members.
	DefaultPartitionCount = 4096
	// DefaultReplicationFactor is the number of virtual nodes per member. 200 evens the
	// shares far better than 20 and keeps a join's moves near 1/N; it costs build time,
	// members × factor hashes and a sort, on a membership change only
	// (TestPlacementAtScale logs both, BenchmarkNew times the build).
	DefaultReplicationFactor = 200
	// DefaultLoad bounds a member's share at 1.25 times the average. Lower evens the
	// load but moves more partitions between surviving members when one joins or
	// leaves; it must stay above 1 for the bound to be always satisfiable.
	DefaultLoad = 1.25
)

// Config tunes placement. The zero value means the defaults.
type Config struct {
	PartitionCount    int     // partitions the 16384 hash slots are grouped into (a power of two); also the most members a ring can place
	ReplicationFactor int     // virtual nodes per member on the hash ring; at least 2
	Load              float64 // a member owns at most ceil(floor(P/M)·Load) partitions; must be > 1
}

// withDefaults fills zero fields with the defaults.
func (c Config) withDefaults() Config {
	if c.PartitionCount == 0 {
		c.PartitionCount = DefaultPartitionCount
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	return c
}

// Validate reports the first field, after defaults, that cannot work, naming it.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.PartitionCount < 1 || c.PartitionCount > hashslot.Count || c.PartitionCount&(c.PartitionCount-1) != 0:
		return fmt.Errorf("ring: PartitionCount %d: want a power of two from 1 to %d (slots are grouped evenly)", c.PartitionCount, hashslot.Count)
	case c.ReplicationFactor < 2 || c.ReplicationFactor > 1000:
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

// MaxShare is the most partitions one member may own in a ring of members members:
// the bound consistent enforces, ceil(floor(P/M)·Load). It is 0 when members is 0.
func (c Config) MaxShare(members int) int {
	c = c.withDefaults()
	if members <= 0 {
		return 0
	}
	return int(math.Ceil(float64(c.PartitionCount/members) * c.Load))
}

// slotShift is how far a slot is shifted right to give its partition.
func (c Config) slotShift() int {
	return bits.TrailingZeros(uint(hashslot.Count / c.PartitionCount))
}
