package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wire"
	"github.com/leapcount/leapcount/leaparray"
)

// How a Handoff travels between nodes (package rpc carries it as a message of its own
// kind, at most MaxHandoffBytes): name from | uvarint id | uvarint to-run (the
// receiver's incarnation; 0: any) | uvarint count | uvarint partitions | uvarint count |
// counters, each name key | uvarint window ms | uvarint buckets | u8 flags (bit 0:
// reset) | buckets | pending, each a uvarint count (at most the counter's buckets) of
// varint index | uvarint count | uvarint count | fences, each name writer key | uvarint
// seq | name epoch (empty: none; at most MaxHandoffEpochBytes). Every field is
// required: a frame that lacks one, or has bytes after the last, is malformed. Its
// answer: u8 status (0 applied, 1 refused, 2 refused: not owner, 3 refused: another
// run) and, when refused, name message.

const (
	// MaxHandoffBytes bounds a Handoff frame, its 4-byte length prefix included. A
	// frame is at most 150 + len(From) + 5·len(Partitions) bytes plus the HandoffSize
	// of each counter and 20 + len(WriterKey) of each fence: senders cut their
	// counters into chunks that fit.
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
	n := wire.UvarintLen(uint64(len(c.Key))) + len(c.Key) + wire.UvarintLen(uint64(c.Spec.WindowMs)) +
		wire.UvarintLen(uint64(c.Spec.Buckets)) + 1
	return n + bucketsSize(c.Buckets) + bucketsSize(c.Pending)
}

func bucketsSize(bs []leaparray.Bucket) int {
	n := wire.UvarintLen(uint64(len(bs)))
	for _, b := range bs {
		n += wire.UvarintLen(uint64(b.Index)<<1^uint64(b.Index>>63)) + wire.UvarintLen(b.Count) // varint: zig-zag
	}
	return n
}

// handoffFrameSize bounds the size of h's frame (its id taken at its longest).
func handoffFrameSize(h *Handoff) int {
	n := 4 + 1 + binary.MaxVarintLen64 + wire.UvarintLen(uint64(len(h.From))) + len(h.From) +
		wire.UvarintLen(h.ID) + wire.UvarintLen(h.ToRun) + wire.UvarintLen(uint64(len(h.Partitions))) +
		wire.UvarintLen(uint64(len(h.Counters)))
	for _, p := range h.Partitions {
		n += wire.UvarintLen(uint64(p))
	}
	for i := range h.Counters {
		n += HandoffSize(&h.Counters[i])
	}
	n += wire.UvarintLen(uint64(len(h.Fences)))
	for _, f := range h.Fences {
		n += 2*binary.MaxVarintLen64 + len(f.WriterKey)
	}
	return n + wire.UvarintLen(uint64(len(h.RedisEpoch))) + len(h.RedisEpoch)
}

// checkHandoff is what the receiver's decoder demands of h, checked before sending: a
// frame it rejects would cost the connection and every call on it.
func checkHandoff(h *Handoff) error {
	if n := handoffFrameSize(h); n > MaxHandoffBytes {
		return fmt.Errorf("%w: %d counters take %d bytes, over MaxHandoffBytes (%d): send smaller chunks",
			ErrHandoffTooLarge, len(h.Counters), n, MaxHandoffBytes)
	}
	if len(h.RedisEpoch) > MaxHandoffEpochBytes {
		return fmt.Errorf("%w: handoff epoch of %d bytes, over MaxHandoffEpochBytes (%d)", counter.ErrBadArgument, len(h.RedisEpoch), MaxHandoffEpochBytes)
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
	b = binary.AppendUvarint(b, uint64(len(h.Fences)))
	for _, f := range h.Fences {
		b = binary.AppendUvarint(b, uint64(len(f.WriterKey)))
		b = append(b, f.WriterKey...)
		b = binary.AppendUvarint(b, f.Seq)
	}
	b = binary.AppendUvarint(b, uint64(len(h.RedisEpoch)))
	return append(b, h.RedisEpoch...)
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

func readHandoff(d *wire.Decoder, h *Handoff) {
	h.From = string(d.Bytes("from"))
	h.ID = d.Uvarint("id")
	h.ToRun = d.Uvarint("to run")
	np := d.Count("partition count", 1, MaxHandoffBytes)
	h.Partitions = make([]int, 0, np)
	for i := 0; i < np && d.Err() == nil; i++ {
		p := d.Uvarint("partition")
		if p > 1<<31 {
			d.Fail("partition")
		}
		h.Partitions = append(h.Partitions, int(p))
	}
	nc := d.Count("counter count", 6, MaxHandoffBytes)
	h.Counters = make([]HandoffCounter, 0, nc)
	for i := 0; i < nc && d.Err() == nil; i++ {
		c := HandoffCounter{Key: string(d.Bytes("key"))}
		c.Spec.WindowMs = d.Int63("window")
		c.Spec.Buckets = int(min(d.Uvarint("buckets"), 1<<31))
		if err := counter.ValidateSpec(c.Spec.WindowMs, c.Spec.Buckets); err != nil && d.Err() == nil {
			d.Fail(fmt.Sprintf("counter %q: %v", c.Key, err))
		}
		flags := d.Byte("flags")
		if flags&^handoffReset != 0 {
			d.Fail("counter flags")
		}
		c.Reset = flags&handoffReset != 0
		c.Buckets = readBuckets(d, "bucket count", c.Spec.Buckets)
		c.Pending = readBuckets(d, "pending count", c.Spec.Buckets)
		h.Counters = append(h.Counters, c)
	}
	nf := d.Count("fence count", 2, MaxHandoffBytes)
	if nf > 0 {
		h.Fences = make([]HandoffFence, 0, nf)
	}
	for i := 0; i < nf && d.Err() == nil; i++ {
		h.Fences = append(h.Fences, HandoffFence{WriterKey: string(d.Bytes("writer key")), Seq: d.Uvarint("seq")})
	}
	e := d.Bytes("epoch")
	if len(e) > MaxHandoffEpochBytes {
		d.Fail("epoch")
	}
	h.RedisEpoch = string(e)
}

// buckets reads at most limit buckets (a counter's own count: a hostile frame cannot
// make the receiver allocate more).
func readBuckets(d *wire.Decoder, what string, limit int) []leaparray.Bucket {
	n := d.Count(what, 2, limit)
	if n == 0 {
		return nil
	}
	bs := make([]leaparray.Bucket, 0, n)
	for k := 0; k < n && d.Err() == nil; k++ {
		bs = append(bs, leaparray.Bucket{Index: d.Varint("index"), Count: d.Uvarint("count")})
	}
	return bs
}

// decodeHandoffAck returns the receiver's refusal (nil: applied); a malformed ack sets
// d.err.
func readHandoffAck(d *wire.Decoder) error {
	status := d.Byte("status")
	if status == ackApplied || d.Err() != nil {
		return nil
	}
	msg := string(d.Bytes("message"))
	switch status {
	case ackNotOwner:
		return fmt.Errorf("%w: %s", ErrHandoffNotOwner, msg)
	case ackOtherRun:
		return fmt.Errorf("%w: %s", ErrHandoffOtherRun, msg)
	case ackRefused:
		return fmt.Errorf("%w: %s", ErrHandoffRefused, msg)
	}
	d.Fail("handoff ack status")
	return nil
}

// EncodeHandoff returns h's encoding, or why a receiver would reject it (too large,
// or malformed), in which case it must not be sent: a frame the receiver rejects costs
// the connection and every call on it.
func EncodeHandoff(h *Handoff) ([]byte, error) {
	if err := checkHandoff(h); err != nil {
		return nil, err
	}
	return appendHandoff(nil, h), nil
}

// ReadHandoffAck reads a handoff's answer: nil when it was applied, else the
// receiver's refusal (ErrHandoffRefused, ErrHandoffNotOwner, ErrHandoffOtherRun). The
// decoder's error says if it was malformed.
func ReadHandoffAck(d *wire.Decoder) error { return readHandoffAck(d) }

// Receiver takes Handoffs (Owner.Handoff in a node).
type Receiver interface {
	Handoff(ctx context.Context, h *Handoff) error
}

// HandoffAnswerer answers Handoffs that arrive as bytes (rpc.MessageHandler's Answer)
// with r: an error from r refuses the handoff, and the sender hears which refusal.
func HandoffAnswerer(r Receiver) func(ctx context.Context, body, out []byte) ([]byte, error) {
	return func(ctx context.Context, body, out []byte) ([]byte, error) {
		var h Handoff
		d := wire.NewDecoder(body)
		readHandoff(&d, &h)
		if err := d.End(); err != nil {
			return nil, err
		}
		err := r.Handoff(ctx, &h)
		switch {
		case err == nil:
			return append(out, ackApplied), nil
		case errors.Is(err, ErrHandoffOtherRun):
			return wire.AppendString(append(out, ackOtherRun), err.Error()), nil
		case errors.Is(err, ErrHandoffNotOwner):
			return wire.AppendString(append(out, ackNotOwner), err.Error()), nil
		}
		return wire.AppendString(append(out, ackRefused), err.Error()), nil
	}
}
