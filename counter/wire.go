package counter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// Wire is how ops and their results travel between nodes, in the frames of package
// rpc (its Codec): an op is u8 kind | uvarint key length | key | uvarint window ms |
// uvarint buckets | uvarint n | uvarint limit, then for Borrow uvarint ask and for
// Return uvarint slice id; a result is u8 code and, for code OK, uvarint count | u8
// allowed | uvarint remaining | varint retry | u8 flags (bit 0 existed, bit 1 sliced,
// bit 2 a slice follows: uvarint id | uvarint n | uvarint ttl ms), for an error code
// uvarint length | message; a code not below is malformed. Releases before slices read
// the flags byte as existed when it is 1; they are never sent Borrow, the only op whose
// answer sets more (peers advertise what they take). The codes carry
// this package's sentinel errors across the hop, so errors.Is works on a result decoded
// from a peer.
type Wire struct{}

// Result codes on the wire.
const (
	codeOK uint8 = iota
	codeBadInput
	codeNotOwner
	codeUnavailable
	codeShuttingDown
	codeExpired
	codeFull
)

// AppendOp appends op.
func (Wire) AppendOp(b []byte, op *Op) []byte {
	b = append(b, uint8(op.Kind))
	b = wire.AppendString(b, op.Key)
	b = binary.AppendUvarint(b, uint64(op.Window))
	b = binary.AppendUvarint(b, uint64(op.Buckets))
	b = binary.AppendUvarint(b, uint64(op.N))
	b = binary.AppendUvarint(b, uint64(op.Limit))
	switch op.Kind {
	case Borrow:
		b = binary.AppendUvarint(b, uint64(op.Ask))
	case Return:
		b = binary.AppendUvarint(b, op.SliceID)
	}
	return b
}

// ReadOp reads an op into op. It is not checked: a receiver checks it as it checks
// every op it is given (Limits.Check).
func (Wire) ReadOp(d *wire.Decoder, op *Op) {
	*op = Op{Kind: Kind(d.Byte("kind"))}
	op.Key = string(d.Bytes("key"))
	op.Window = d.Int63("window")
	op.Buckets = int(min(d.Uvarint("buckets"), 1<<31))
	op.N = d.Int63("n")
	op.Limit = d.Int63("limit")
	switch op.Kind {
	case Borrow:
		op.Ask = d.Int63("ask")
	case Return:
		op.SliceID = d.Uvarint("slice id")
	}
}

// The bits of a result's flags byte.
const (
	flagExisted uint8 = 1 << iota
	flagSliced
	flagLent
)

// AppendResult appends r.
func (Wire) AppendResult(b []byte, r *Result) []byte {
	code := errCode(r.Err)
	b = append(b, code)
	if code != codeOK {
		return wire.AppendString(b, r.Err.Error())
	}
	b = binary.AppendUvarint(b, uint64(r.Count))
	b = append(b, wire.Bool(r.Allowed))
	b = binary.AppendUvarint(b, uint64(r.Remaining))
	b = binary.AppendVarint(b, r.RetryAfterMs)
	flags := wire.Bool(r.Existed)
	if r.Sliced {
		flags |= flagSliced
	}
	if r.Lent == nil {
		return append(b, flags)
	}
	b = append(b, flags|flagLent)
	b = binary.AppendUvarint(b, r.Lent.ID)
	b = binary.AppendUvarint(b, uint64(r.Lent.N))
	return binary.AppendUvarint(b, uint64(r.Lent.TTL/time.Millisecond))
}

// ReadResult reads a result into r.
func (Wire) ReadResult(d *wire.Decoder, r *Result) {
	code := d.Byte("code")
	if code > codeFull {
		d.Fail("result code")
		*r = Result{}
		return
	}
	if code != codeOK {
		*r = Result{Err: codeErr(code, string(d.Bytes("message")))}
		return
	}
	*r = Result{
		Count:        d.Int63("count"),
		Allowed:      d.Byte("allowed") == 1,
		Remaining:    d.Int63("remaining"),
		RetryAfterMs: d.Varint("retry"),
	}
	flags := d.Byte("flags")
	r.Existed, r.Sliced = flags&flagExisted != 0, flags&flagSliced != 0
	if flags&flagLent != 0 {
		r.Lent = &Lent{ID: d.Uvarint("slice id"), N: d.Int63("slice n"),
			TTL: time.Duration(min(d.Uvarint("slice ttl"), maxTTLMs)) * time.Millisecond}
	}
}

// maxTTLMs bounds a slice's time to live read from the wire (a window's length).
const maxTTLMs = MaxWindowMs

// Expired is the result of an op its receiver did not decide because its time ran out
// (ErrExpired).
func (Wire) Expired() Result { return Result{Err: ErrExpired} }

func errCode(err error) uint8 {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, ErrNotOwner):
		return codeNotOwner
	case errors.Is(err, ErrExpired):
		return codeExpired
	case errors.Is(err, ErrShuttingDown):
		return codeShuttingDown
	case errors.Is(err, ErrFull):
		return codeFull
	case IsBadInput(err):
		return codeBadInput
	}
	return codeUnavailable
}

// codeErr rebuilds an error from the wire, wrapping the matching sentinel.
func codeErr(code uint8, msg string) error {
	switch code {
	case codeOK:
		return nil
	case codeNotOwner:
		return fmt.Errorf("%w: %s", ErrNotOwner, msg)
	case codeExpired:
		return fmt.Errorf("%w: %w: %s", ErrUnavailable, ErrExpired, msg)
	case codeShuttingDown:
		return fmt.Errorf("%w: %s", ErrShuttingDown, msg)
	case codeBadInput:
		return fmt.Errorf("%w: %s", ErrBadArgument, msg)
	case codeFull: // the message already says it, once is enough
		return fmt.Errorf("%w: %s", ErrFull, strings.TrimPrefix(msg, ErrFull.Error()+": "))
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, msg)
}
