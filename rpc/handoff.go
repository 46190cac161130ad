package rpc

import (
	"context"
	"encoding/binary"
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
	From       string // the sender's member name
	ID         uint64 // unique per sender run; the receiver applies each ID once
	Epoch      uint64 // the sender's ring epoch when it released
	Partitions []int
	Counters   []HandoffCounter
}

// HandoffCounter is one counter's state.
type HandoffCounter struct {
	Key     string
	Spec    leaparray.Spec
	Buckets []leaparray.Bucket
}

// HandoffHandler receives Handoffs.
type HandoffHandler interface {
	Handoff(ctx context.Context, h *Handoff) error
}

const (
	frameHandoff    uint8 = 3
	frameHandoffAck uint8 = 4
)

// ErrHandoffRefused: the receiver did not take the handoff (it was not expecting it).
var ErrHandoffRefused = errors.New("rpc: handoff refused")

func appendHandoff(b []byte, h *Handoff) []byte {
	b = binary.AppendUvarint(b, uint64(len(h.From)))
	b = append(b, h.From...)
	b = binary.AppendUvarint(b, h.ID)
	b = binary.AppendUvarint(b, h.Epoch)
	b = binary.AppendUvarint(b, uint64(len(h.Partitions)))
	for _, p := range h.Partitions {
		b = binary.AppendUvarint(b, uint64(p))
	}
	b = binary.AppendUvarint(b, uint64(len(h.Counters)))
	for i := range h.Counters {
		c := &h.Counters[i]
		b = binary.AppendUvarint(b, uint64(len(c.Key)))
		b = append(b, c.Key...)
		b = binary.AppendUvarint(b, uint64(c.Spec.WindowMs))
		b = binary.AppendUvarint(b, uint64(c.Spec.Buckets))
		b = binary.AppendUvarint(b, uint64(len(c.Buckets)))
		for _, bk := range c.Buckets {
			b = binary.AppendVarint(b, bk.Index)
			b = binary.AppendUvarint(b, bk.Count)
		}
	}
	return b
}

func (d *decoder) handoff(h *Handoff) {
	h.From = string(d.bytes("from"))
	h.ID = d.uvarint("id")
	h.Epoch = d.uvarint("epoch")
	np := d.count("partition count", 1)
	h.Partitions = make([]int, 0, np)
	for i := 0; i < np && d.err == nil; i++ {
		h.Partitions = append(h.Partitions, int(min(d.uvarint("partition"), 1<<31)))
	}
	nc := d.count("counter count", 4)
	h.Counters = make([]HandoffCounter, 0, nc)
	for i := 0; i < nc && d.err == nil; i++ {
		c := HandoffCounter{Key: string(d.bytes("key"))}
		c.Spec.WindowMs = d.int63("window")
		c.Spec.Buckets = int(min(d.uvarint("buckets"), 1<<31))
		nb := d.count("bucket count", 2)
		c.Buckets = make([]leaparray.Bucket, 0, nb)
		for k := 0; k < nb && d.err == nil; k++ {
			c.Buckets = append(c.Buckets, leaparray.Bucket{Index: d.varint("index"), Count: d.uvarint("count")})
		}
		h.Counters = append(h.Counters, c)
	}
}

// Handoff sends h to the node at addr and waits for it to be applied (or refused).
// It goes on its own frame, never batched with ops.
func (c *Client) Handoff(ctx context.Context, addr string, h *Handoff) error {
	p, err := c.peer(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	cl := &call{handoff: h, done: make(chan error, 1)}
	return p.do(ctx, cl)
}

// serveHandoff decodes and applies a handoff frame and returns the ack frame.
func (s *Server) serveHandoff(ctx context.Context, d *decoder, out []byte) []byte {
	id := d.uvarint("id")
	var h Handoff
	d.handoff(&h)
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	err := d.err
	if err == nil {
		if s.handoff == nil {
			err = fmt.Errorf("%w: this node takes no handoffs", ErrHandoffRefused)
		} else {
			err = s.handoff.Handoff(ctx, &h)
		}
	}
	out = appendHeader(out[:0], frameHandoffAck, id)
	if err == nil {
		out = append(out, 0)
	} else {
		msg := err.Error()
		out = append(out, 1)
		out = binary.AppendUvarint(out, uint64(len(msg)))
		out = append(out, msg...)
	}
	finishFrame(out, 0)
	return out
}

func decodeHandoffAck(d *decoder) error {
	if d.byte("status") == 0 {
		return d.err
	}
	msg := string(d.bytes("message"))
	if d.err != nil {
		return d.err
	}
	return fmt.Errorf("%w: %s", ErrHandoffRefused, msg)
}
