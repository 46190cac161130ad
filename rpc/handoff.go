package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/leapcount/leapcount/counter"
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
	// ID. (Senders before this field sent 0 in its place, which no receiver read.)
	ToRun      uint64
	Partitions []int
	Counters   []HandoffCounter
	// Fences are the sender's write-behind calls that may still apply in Redis and
	// carry deltas of these counters (sent, not answered, while Redis was down): the
	// receiver holds those counts in memory and reads none of them back from Redis
	// until every fence is reached. Encoded only when present, so a Handoff without
	// them is the frame older nodes read.
	Fences []HandoffFence
	// Epoch is the Redis epoch (the partition stamps', fallback) the sender last knew
	// its counters to be in ("": none, or no Redis). A receiver that knows another
	// writes them back in full: Redis may have lost their state between the two (an
	// emptied Redis the sender had not noticed). Encoded only when set, after the
	// fences (an empty fence section is then sent as a zero count), so a Handoff
	// without it is the frame older nodes read.
	Epoch string
}

// MaxHandoffEpochBytes bounds Handoff.Epoch on the wire.
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

// HandoffHandler receives Handoffs. An error refuses the handoff: the sender gets
// ErrHandoffRefused, or ErrHandoffNotOwner when the error wraps that.
type HandoffHandler interface {
	Handoff(ctx context.Context, h *Handoff) error
}

const (
	frameHandoff    uint8 = 3
	frameHandoffAck uint8 = 4

	// MaxHandoffBytes bounds a Handoff frame, its 4-byte length prefix included. A
	// frame is at most 70 + len(From) + 5·len(Partitions) bytes plus the HandoffSize
	// of each counter: senders cut their counters into chunks that fit.
	MaxHandoffBytes = 4 << 20

	handoffReset uint8 = 1 // HandoffCounter flag
)

// Handoff acknowledgement status.
const (
	ackApplied uint8 = iota
	ackRefused
	ackNotOwner
	ackOtherRun
)

// HandoffSize is how many bytes c takes in a Handoff frame.
func HandoffSize(c *HandoffCounter) int {
	n := uvarintLen(uint64(len(c.Key))) + len(c.Key) + uvarintLen(uint64(c.Spec.WindowMs)) +
		uvarintLen(uint64(c.Spec.Buckets)) + 1
	return n + bucketsSize(c.Buckets) + bucketsSize(c.Pending)
}

func bucketsSize(bs []leaparray.Bucket) int {
	n := uvarintLen(uint64(len(bs)))
	for _, b := range bs {
		n += uvarintLen(uint64(b.Index)<<1^uint64(b.Index>>63)) + uvarintLen(b.Count) // varint: zig-zag
	}
	return n
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// handoffFrameSize bounds the size of h's frame (its id taken at its longest).
func handoffFrameSize(h *Handoff) int {
	n := 4 + 1 + binary.MaxVarintLen64 + uvarintLen(uint64(len(h.From))) + len(h.From) +
		uvarintLen(h.ID) + uvarintLen(h.ToRun) + uvarintLen(uint64(len(h.Partitions))) +
		uvarintLen(uint64(len(h.Counters)))
	for _, p := range h.Partitions {
		n += uvarintLen(uint64(p))
	}
	for i := range h.Counters {
		n += HandoffSize(&h.Counters[i])
	}
	for _, f := range h.Fences {
		n += 2*binary.MaxVarintLen64 + len(f.WriterKey)
	}
	return n
}

// checkHandoff is what the receiver's decoder demands of h, checked before sending: a
// frame it rejects would cost the connection and every call on it.
func checkHandoff(h *Handoff) error {
	if n := handoffFrameSize(h); n > MaxHandoffBytes {
		return fmt.Errorf("%w: %d counters take %d bytes, over MaxHandoffBytes (%d): send smaller chunks",
			ErrHandoffTooLarge, len(h.Counters), n, MaxHandoffBytes)
	}
	for _, p := range h.Partitions {
		if p < 0 || p > 1<<31 {
			return fmt.Errorf("%w: handoff partition %d", counter.ErrBadArgument, p)
		}
	}
	for i := range h.Counters {
		c := &h.Counters[i]
		if err := counter.ValidateSpec(c.Spec.WindowMs, c.Spec.Buckets); err != nil {
			return fmt.Errorf("handoff counter %q: %w", c.Key, err)
		}
		if len(c.Buckets) > c.Spec.Buckets || len(c.Pending) > c.Spec.Buckets {
			return fmt.Errorf("%w: handoff counter %q: %d buckets, %d pending, for a spec of %d",
				counter.ErrBadBuckets, c.Key, len(c.Buckets), len(c.Pending), c.Spec.Buckets)
		}
	}
	return nil
}

func appendHandoff(b []byte, h *Handoff) []byte {
	b = binary.AppendUvarint(b, uint64(len(h.From)))
	b = append(b, h.From...)
	b = binary.AppendUvarint(b, h.ID)
	b = binary.AppendUvarint(b, h.ToRun)
	b = binary.AppendUvarint(b, uint64(len(h.Partitions)))
	for _, p := range h.Partitions {
		b = binary.AppendUvarint(b, uint64(p))
	}
	b = binary.AppendUvarint(b, uint64(len(h.Counters)))
	for i := range h.Counters {
		b = appendHandoffCounter(b, &h.Counters[i])
	}
	if len(h.Fences) > 0 || h.Epoch != "" {
		b = binary.AppendUvarint(b, uint64(len(h.Fences)))
		for _, f := range h.Fences {
			b = binary.AppendUvarint(b, uint64(len(f.WriterKey)))
			b = append(b, f.WriterKey...)
			b = binary.AppendUvarint(b, f.Seq)
		}
	}
	if h.Epoch != "" {
		b = binary.AppendUvarint(b, uint64(len(h.Epoch)))
		b = append(b, h.Epoch...)
	}
	return b
}

func appendHandoffCounter(b []byte, c *HandoffCounter) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.Key)))
	b = append(b, c.Key...)
	b = binary.AppendUvarint(b, uint64(c.Spec.WindowMs))
	b = binary.AppendUvarint(b, uint64(c.Spec.Buckets))
	var flags uint8
	if c.Reset {
		flags |= handoffReset
	}
	b = append(b, flags)
	return appendBuckets(appendBuckets(b, c.Buckets), c.Pending)
}

func appendBuckets(b []byte, bs []leaparray.Bucket) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs)))
	for _, bk := range bs {
		b = binary.AppendVarint(b, bk.Index)
		b = binary.AppendUvarint(b, bk.Count)
	}
	return b
}

func (d *decoder) handoff(h *Handoff) {
	h.From = string(d.bytes("from"))
	h.ID = d.uvarint("id")
	h.ToRun = d.uvarint("to run")
	np := d.count("partition count", 1, MaxHandoffBytes)
	h.Partitions = make([]int, 0, np)
	for i := 0; i < np && d.err == nil; i++ {
		p := d.uvarint("partition")
		if p > 1<<31 {
			d.fail("partition")
		}
		h.Partitions = append(h.Partitions, int(p))
	}
	nc := d.count("counter count", 6, MaxHandoffBytes)
	h.Counters = make([]HandoffCounter, 0, nc)
	for i := 0; i < nc && d.err == nil; i++ {
		c := HandoffCounter{Key: string(d.bytes("key"))}
		c.Spec.WindowMs = d.int63("window")
		c.Spec.Buckets = int(min(d.uvarint("buckets"), 1<<31))
		if err := counter.ValidateSpec(c.Spec.WindowMs, c.Spec.Buckets); err != nil && d.err == nil {
			d.fail(fmt.Sprintf("counter %q: %v", c.Key, err))
		}
		flags := d.byte("flags")
		if flags&^handoffReset != 0 {
			d.fail("counter flags")
		}
		c.Reset = flags&handoffReset != 0
		c.Buckets = d.buckets("bucket count", c.Spec.Buckets)
		c.Pending = d.buckets("pending count", c.Spec.Buckets)
		h.Counters = append(h.Counters, c)
	}
	if len(d.b) == 0 || d.err != nil {
		return // no fences: the frame of older senders too
	}
	nf := d.count("fence count", 2, MaxHandoffBytes)
	if nf > 0 {
		h.Fences = make([]HandoffFence, 0, nf)
	}
	for i := 0; i < nf && d.err == nil; i++ {
		h.Fences = append(h.Fences, HandoffFence{WriterKey: string(d.bytes("writer key")), Seq: d.uvarint("seq")})
	}
	if len(d.b) == 0 || d.err != nil {
		if nf == 0 && d.err == nil {
			d.fail("fence count") // an empty section is sent only before an epoch
		}
		return
	}
	e := d.bytes("epoch")
	if len(e) == 0 || len(e) > MaxHandoffEpochBytes {
		d.fail("epoch")
	}
	h.Epoch = string(e)
}

// buckets reads at most limit buckets (a counter's own count: a hostile frame cannot
// make the receiver allocate more).
func (d *decoder) buckets(what string, limit int) []leaparray.Bucket {
	n := d.count(what, 2, limit)
	if n == 0 {
		return nil
	}
	bs := make([]leaparray.Bucket, 0, n)
	for k := 0; k < n && d.err == nil; k++ {
		bs = append(bs, leaparray.Bucket{Index: d.varint("index"), Count: d.uvarint("count")})
	}
	return bs
}

// Handoff sends h to the node at addr and waits for it to be applied (or refused:
// ErrHandoffRefused, or ErrHandoffNotOwner when the receiver does not own its
// partitions). It goes on its own frame, never batched with ops. A handoff whose frame
// would exceed MaxHandoffBytes, or that the receiver would reject as malformed, fails
// at once, unsent.
func (c *Client) Handoff(ctx context.Context, addr string, h *Handoff) error {
	if err := checkHandoff(h); err != nil {
		return err
	}
	return c.call(ctx, addr, &call{handoff: h})
}

// serveHandoff decodes and applies a handoff frame and returns the ack frame. A
// malformed frame is an error: the connection is dropped.
func (s *Server) serveHandoff(ctx context.Context, frame []byte) ([]byte, error) {
	if len(frame)+4 > MaxHandoffBytes {
		return nil, fmt.Errorf("%w: handoff of %d bytes, over MaxHandoffBytes", ErrBadFrame, len(frame)+4)
	}
	d := decoder{b: frame[1:]}
	id := d.uvarint("id")
	var h Handoff
	d.handoff(&h)
	if err := d.end(); err != nil {
		return nil, err
	}
	var err error
	if s.handoff == nil {
		err = fmt.Errorf("%w: this node takes no handoffs", ErrHandoffRefused)
	} else {
		err = s.handoff.Handoff(ctx, &h)
	}
	out := appendHeader(nil, frameHandoffAck, id)
	switch {
	case err == nil:
		out = append(out, ackApplied)
	case errors.Is(err, ErrHandoffOtherRun):
		out = appendMessage(append(out, ackOtherRun), err.Error())
	case errors.Is(err, ErrHandoffNotOwner):
		out = appendMessage(append(out, ackNotOwner), err.Error())
	default:
		out = appendMessage(append(out, ackRefused), err.Error())
	}
	finishFrame(out, 0)
	return out, nil
}

func appendMessage(b []byte, msg string) []byte {
	b = binary.AppendUvarint(b, uint64(len(msg)))
	return append(b, msg...)
}

// decodeHandoffAck returns the receiver's refusal (nil: applied); a malformed ack sets
// d.err.
func decodeHandoffAck(d *decoder) error {
	status := d.byte("status")
	if status == ackApplied || d.err != nil {
		return nil
	}
	msg := string(d.bytes("message"))
	switch status {
	case ackNotOwner:
		return fmt.Errorf("%w: %s", ErrHandoffNotOwner, msg)
	case ackOtherRun:
		return fmt.Errorf("%w: %s", ErrHandoffOtherRun, msg)
	case ackRefused:
		return fmt.Errorf("%w: %s", ErrHandoffRefused, msg)
	}
	d.fail("handoff ack status")
	return nil
}
