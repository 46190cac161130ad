// Package wire holds the primitives of the node-to-node binary encoding: varints,
// length-prefixed strings and bounded counts, read by a Decoder whose first error
// sticks. The transport (package rpc) frames messages with them, and each package that
// defines a message (counter's ops, lease's heartbeats, owner's handoffs) encodes its
// own with them, so the transport owns no domain type.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// ErrMalformed: bytes that do not decode as what they should be. A receiver drops the
// connection that carried them.
var ErrMalformed = errors.New("rpc: malformed frame")

// Decoder reads an encoded message. The first error sticks: later reads return zero
// values, and End returns it.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a decoder of b.
func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// Fail records that the field named what is malformed, unless an error is recorded
// already, and drops the rest.
func (d *Decoder) Fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrMalformed, what)
	}
	d.b = nil
}

// Err is the first error met, if any.
func (d *Decoder) Err() error { return d.err }

// Len is how many bytes are left.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes left, and leaves none.
func (d *Decoder) Rest() []byte {
	b := d.b
	d.b = nil
	return b
}

// Byte reads one byte.
func (d *Decoder) Byte(what string) uint8 {
	if len(d.b) < 1 {
		d.Fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (d *Decoder) Varint(what string) int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Int63 reads an unsigned varint that must fit an int64 field.
func (d *Decoder) Int63(what string) int64 {
	v := d.Uvarint(what)
	if v > 1<<63-1 {
		d.Fail(what)
		return 0
	}
	return int64(v)
}

// Bytes reads a length-prefixed byte string. The result shares the decoder's memory.
func (d *Decoder) Bytes(what string) []byte {
	n := d.Uvarint(what)
	if n > uint64(len(d.b)) {
		d.Fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// Count reads an element count of at most limit, bounded by the bytes left too (every
// element takes at least min bytes), so a corrupt count cannot make the reader
// allocate without limit.
func (d *Decoder) Count(what string, min, limit int) int {
	n := d.Uvarint(what)
	if n > uint64(len(d.b)/min) || n > uint64(limit) {
		d.Fail(what)
		return 0
	}
	return int(n)
}

// End fails a message with bytes left over, and returns the decoder's error.
func (d *Decoder) End() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail("trailing bytes")
	}
	return d.err
}

// AppendString appends s, length-prefixed (what Bytes reads).
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UvarintLen is how many bytes v takes as an unsigned varint.
func UvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// Bool is a flag byte: 1 for true.
func Bool(v bool) byte {
	if v {
		return 1
	}
	return 0
}
