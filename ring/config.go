package ring

import (
	"errors"
	"fmt"
	"math"
)

// Defaults for Config. They must be the same on every node of a cluster.
const (
	// DefaultPartitionCount is a prime (consistent's own default): keys spread evenly
	// over partitions whatever the hash's low bits do. 271 partitions keep the owner
	// table small and a rebuild cheap, still give every member of a 100-node cluster
	// two or three partitions, and cap a cluster at 271 members.
	DefaultPartitionCount = 271
	// DefaultReplicationFactor is the number of virtual nodes per member. 20 spreads
	// the ring walk well enough for the load bound to do the rest; more costs build
	// time (members × factor hashes and a sort) for little gain.
	DefaultReplicationFactor = 20
	// DefaultLoad bounds a member's share at 1.25 times the average. Lower evens the
	// load but moves more partitions between surviving members when one joins or
	// leaves; it must stay above 1 for the bound to be always satisfiable.
	DefaultLoad = 1.25
)

// Config tunes placement. The zero value means the defaults.
type Config struct {
	PartitionCount    int     // partitions keys are hashed into; also the most members a ring can place
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

// maxPartitions keeps the owner table's int32 indexes and the build time reasonable.
const maxPartitions = 1 << 20

// Validate reports the first field, after defaults, that cannot work, naming it.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.PartitionCount < 1 || c.PartitionCount > maxPartitions:
		return fmt.Errorf("ring: PartitionCount %d out of range [1, %d]", c.PartitionCount, maxPartitions)
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
