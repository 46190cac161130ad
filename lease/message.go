package lease

import "math/bits"

// Set is a set of partitions, one bit each.
type Set []uint64

// NewSet returns an empty set able to hold partitions 0..n-1.
func NewSet(n int) Set { return make(Set, setWords(n)) }

func setWords(n int) int { return (n + 63) / 64 }

// Has reports whether p is in s.
func (s Set) Has(p int) bool {
	i := p >> 6
	return p >= 0 && i < len(s) && s[i]&(1<<(uint(p)&63)) != 0
}

// Add puts p in s (p must be below the size s was made for).
func (s Set) Add(p int) { s[p>>6] |= 1 << (uint(p) & 63) }

// Remove takes p out of s.
func (s Set) Remove(p int) {
	if i := p >> 6; p >= 0 && i < len(s) {
		s[i] &^= 1 << (uint(p) & 63)
	}
}

// Len is the number of partitions in s.
func (s Set) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Each calls f for every partition in s, in increasing order.
func (s Set) Each(f func(p int)) {
	for i, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			f(i<<6 | b)
			w &^= 1 << uint(b)
		}
	}
}

// Clone returns a copy of s.
func (s Set) Clone() Set { return append(Set(nil), s...) }

// Request is one heartbeat from a node to a voter: the partitions it claims and those it
// gives up, and what it sees of the cluster.
type Request struct {
	From        string // the sender's member name
	Incarnation uint64 // the sender's run: a restarted node is another holder
	Round       uint64 // echoed in the Reply
	Claims      Set    // partitions the sender wants to hold (or keep holding)
	Drops       Set    // partitions the sender gives up now
	Voters      []string
	Version     uint64   // of Voters (Voters.Version)
	Alive       []string // members the sender sees alive, itself included

	// Change is the sender's phase message for a voter change it proposes (nil: none).
	Change *ChangeMsg

	// SentAt is the sender's counters' clock (KeeperConfig.Wall, ms since the Unix
	// epoch) as it began the round: with the Reply's two readings, the sender measures
	// the grantor's clock against its own, as NTP does (Keeper.ClockOffsets). 0: the
	// sender has no such clock.
	SentAt int64
}

// Refusal says why a grantor granted nothing.
type Refusal uint8

const (
	RefusedNone       Refusal = iota // the Reply's Granted says what was granted
	RefusedNotMember                 // the sender is neither a voter nor a member alive for this grantor
	RefusedStarting                  // the grantor started less than one grant ago
	RefusedWrongShape                // the sender's partition count differs
)

// Reply answers a Request.
type Reply struct {
	Round   uint64
	Refused Refusal
	Granted Set // the claimed partitions granted
	Voters  []string
	Version uint64 // of Voters
	Alive   []string
	Change  *ChangeState // the grantor's acceptor state for a change from its voter set (nil: none)
	// ReceivedAt and RepliedAt are the grantor's counters' clock as the Request arrived
	// and as it answered (ms since the Unix epoch; 0: it has none, or the Request had no
	// SentAt).
	ReceivedAt, RepliedAt int64
	// Silent names the members this grantor, a voter, exchanged no heartbeat with for a
	// lease's length (Keeper.Silent): a node that is not a voter exchanges heartbeats with
	// the voters alone, and learns from them which of the other members can renew nothing.
	Silent []string
}

// Limits of a Request or Reply on the wire, so a peer cannot make a node allocate
// without bound: names, members and partitions.
const (
	MaxNameBytes  = 512
	MaxMembers    = 4096
	MaxPartitions = 1 << 20
)
