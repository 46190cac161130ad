package owner

import (
	"errors"
	"fmt"

	"github.com/leapcount/leapcount/leaparray"
)

// Handoff is a message from a counter's old owner to its new one. A node that loses
// partitions (its ring moved them to another member) stops deciding their counters,
// writes what it had not yet persisted, and sends the new owner a Handoff naming the
// partitions it released. Without Redis to carry state, the counters themselves travel
// in Handoffs too, in chunks (the last chunk names the partitions).
type Handoff struct {
	From string // the sender's member name
	ID   uint64 // unique per sender run; the receiver applies each ID once
	// ToRun is the receiver's incarnation the sender means it for (0: whichever
	// runs): a receiver of another run refuses it (ErrHandoffOtherRun), so that a
	// Handoff in doubt sent again never reaches a restarted node that cannot know its
	// ID.
	ToRun      uint64
	Partitions []int
	Counters   []HandoffCounter
	// Fences are the sender's write-behind calls that may still apply in Redis and
	// carry deltas of these counters (sent, not answered, while Redis was down): the
	// receiver holds those counts in memory and reads none of them back from Redis
	// until every fence is reached.
	Fences []HandoffFence
	// RedisEpoch is the Redis epoch (the partition stamps', fallback) the sender last knew
	// its counters to be in ("": none, or no Redis). A receiver that knows another
	// writes them back in full: Redis may have lost their state between the two (an
	// emptied Redis the sender had not noticed). At most MaxHandoffEpochBytes.
	RedisEpoch string
}

// MaxHandoffEpochBytes bounds Handoff.RedisEpoch on the wire.
const MaxHandoffEpochBytes = 64

// HandoffFence is one writer's call in doubt: Redis has applied it once the writer's
// high-water mark at WriterKey is at Seq or above.
type HandoffFence struct {
	WriterKey string
	Seq       uint64
}

// HandoffCounter is one counter's state. Spec must pass counter.ValidateSpec, and
// Buckets and Pending hold at most Spec.Buckets buckets each.
type HandoffCounter struct {
	Key     string
	Spec    leaparray.Spec
	Buckets []leaparray.Bucket
	Pending []leaparray.Bucket // the part of Buckets not yet persisted to Redis
	Reset   bool               // a reset not yet persisted to Redis
}

// Errors of a handoff's delivery.
var (
	// ErrHandoffRefused: the receiver did not take the handoff.
	ErrHandoffRefused = errors.New("rpc: handoff refused")
	// ErrHandoffNotOwner: the receiver refused the handoff because it does not own its
	// partitions: send it to the node that does. Owner.Handoff returns it (wrapped) and
	// the sender gets it back. It wraps ErrHandoffRefused.
	ErrHandoffNotOwner = fmt.Errorf("%w: receiver does not own the partitions", ErrHandoffRefused)
	// ErrHandoffOtherRun: the receiver is a later run of the node than the one the
	// handoff names (Handoff.ToRun): it did not apply it, and whether the earlier run
	// did is gone with that run. It wraps ErrHandoffRefused.
	ErrHandoffOtherRun = fmt.Errorf("%w: meant for an earlier run of the receiver", ErrHandoffRefused)
	// ErrHandoffTooLarge: the handoff's frame would exceed MaxHandoffBytes; it was not
	// sent. Cut it into smaller chunks (HandoffSize).
	ErrHandoffTooLarge = errors.New("rpc: handoff too large")
)
