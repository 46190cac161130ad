package rpc

import (
	"encoding/binary"
	"fmt"

	"github.com/leapcount/leapcount/counter"
)

const (
	frameRequest  uint8 = 1
	frameResponse uint8 = 2

	flagForwarded uint8 = 1

	// MaxFrameBytes bounds what a peer may send, so a corrupt length cannot make us
	// allocate without limit.
	MaxFrameBytes = 64 << 20
)

// Request is one batch of ops sent to the owner.
type Request struct {
	Epoch     uint64 // the sender's ring epoch
	Forwarded bool   // the hop mark: the receiver must not forward these ops again
	// Deadline (unix ms; 0: none): an owner that reads the request later does not decide
	// it. The sender has given up by then, and may have decided the ops elsewhere (from
	// Redis); deciding them too would count them twice. A frozen owner (SIGSTOP) finds
	// such requests in its socket when it wakes.
	Deadline int64
	Ops      []counter.Op
}

// appendHeader starts a frame; finishFrame fills in the length once the body is written.
func appendHeader(b []byte, typ uint8, id uint64) []byte {
	b = append(b, 0, 0, 0, 0, typ)
	return binary.AppendUvarint(b, id)
}

func finishFrame(b []byte, start int) {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
}

func appendRequestHead(b []byte, epoch uint64, forwarded bool, deadline int64, n int) []byte {
	var flags uint8
	if forwarded {
		flags |= flagForwarded
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, epoch)
	b = binary.AppendUvarint(b, uint64(max(deadline, 0)))
	return binary.AppendUvarint(b, uint64(n))
}

func appendOp(b []byte, op *counter.Op) []byte {
	b = append(b, uint8(op.Kind))
	b = binary.AppendUvarint(b, uint64(len(op.Key)))
	b = append(b, op.Key...)
	b = binary.AppendUvarint(b, uint64(op.Window))
	b = binary.AppendUvarint(b, uint64(op.Buckets))
	b = binary.AppendUvarint(b, uint64(op.N))
	return binary.AppendUvarint(b, uint64(op.Limit))
}

func appendResult(b []byte, r *counter.Result) []byte {
	code := errCode(r.Err)
	b = append(b, code)
	if code != codeOK {
		msg := r.Err.Error()
		b = binary.AppendUvarint(b, uint64(len(msg)))
		return append(b, msg...)
	}
	b = binary.AppendUvarint(b, uint64(r.Count))
	b = append(b, boolByte(r.Allowed))
	b = binary.AppendUvarint(b, uint64(r.Remaining))
	b = binary.AppendVarint(b, r.RetryAfterMs)
	return append(b, boolByte(r.Existed))
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// decoder reads a frame body; the first error sticks and later reads return zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrBadFrame, what)
	}
	d.b = nil
}

func (d *decoder) byte(what string) uint8 {
	if len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint(what string) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int63 reads a uvarint that must fit an int64 field.
func (d *decoder) int63(what string) int64 {
	v := d.uvarint(what)
	if v > 1<<63-1 {
		d.fail(what)
		return 0
	}
	return int64(v)
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// count reads a element count, bounded by the bytes left (every element takes at least
// min bytes), so a corrupt count cannot make us allocate without limit.
func (d *decoder) count(what string, min int) int {
	n := d.uvarint(what)
	if n > uint64(len(d.b)/min) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) request(req *Request) {
	flags := d.byte("flags")
	req.Forwarded = flags&flagForwarded != 0
	req.Epoch = d.uvarint("epoch")
	req.Deadline = d.int63("deadline")
	n := d.count("op count", 7)
	req.Ops = req.Ops[:0]
	for i := 0; i < n && d.err == nil; i++ {
		op := counter.Op{Kind: counter.Kind(d.byte("kind"))}
		op.Key = string(d.bytes("key"))
		op.Window = d.int63("window")
		op.Buckets = int(min(d.uvarint("buckets"), 1<<31))
		op.N = d.int63("n")
		op.Limit = d.int63("limit")
		req.Ops = append(req.Ops, op)
	}
}

func (d *decoder) results(dst []counter.Result) {
	n := d.count("result count", 2)
	if n != len(dst) {
		d.fail(fmt.Sprintf("result count %d for %d ops", n, len(dst)))
		return
	}
	for i := range dst {
		code := d.byte("code")
		if code != codeOK {
			dst[i] = counter.Result{Err: codeErr(code, string(d.bytes("message")))}
			continue
		}
		dst[i] = counter.Result{
			Count:        d.int63("count"),
			Allowed:      d.byte("allowed") == 1,
			Remaining:    d.int63("remaining"),
			RetryAfterMs: d.varint("retry"),
			Existed:      d.byte("existed") == 1,
		}
	}
}
