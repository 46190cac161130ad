package rpc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/leapcount/leapcount/counter"
)

const (
	frameRequest  uint8 = 1
	frameResponse uint8 = 2

	flagForwarded uint8 = 1
	// flagBudget says the deadline field holds budgetBase plus the Budget in ms. A
	// decoder of the previous version ignores this bit and reads the field as unix ms:
	// past budgetBase (the year 10889) is as good as no deadline to it, where a bare
	// budget would read as 1970 and expire every op.
	flagBudget uint8 = 2

	budgetBase  = 1 << 48
	maxBudgetMs = (1<<63 - 1) / 1_000_000 // the longest Budget a time.Duration holds

	// MaxFrameBytes bounds what a peer may send, so a corrupt length cannot make us
	// allocate without limit.
	MaxFrameBytes = 64 << 20

	// readStep is how much a frame's buffer grows at a time as its bytes arrive, so a
	// length prefix alone (64 MiB claimed, nothing sent) costs nothing.
	readStep = 64 << 10
	// frameStall bounds how long a frame may stop arriving once it has begun: a peer
	// that sends part of a frame and stalls costs its connection. Between frames a
	// connection may stay idle for ever (peers keep theirs open).
	frameStall = 30 * time.Second
)

// frameReader reads length-prefixed frames from a connection.
type frameReader struct {
	br    *bufio.Reader
	nc    net.Conn // for its read deadline
	stall time.Duration
	armed bool // a read deadline is set
}

func newFrameReader(nc net.Conn, stall time.Duration) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(nc, 64<<10), nc: nc, stall: stall}
}

// next reads one frame (its type byte and what follows) into buf, reusing its memory.
// It waits for a frame's first byte as long as it takes; after that, every wait for
// more bytes is bounded by the stall timeout. The buffer grows by readStep as bytes
// arrive.
func (r *frameReader) next(buf []byte) ([]byte, error) {
	buf = buf[:0]
	if _, err := r.br.Peek(1); err != nil {
		return buf, err
	}
	var hdr [4]byte
	for k := 0; k < len(hdr); {
		m, err := r.read(hdr[k:])
		if k += m; err != nil && k < len(hdr) {
			return buf, truncated(err)
		}
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n == 0 || n > MaxFrameBytes {
		return buf, fmt.Errorf("%w: length %d", ErrBadFrame, n)
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), readStep))
		}
		m, err := r.read(buf[len(buf):min(cap(buf), n)])
		if buf = buf[:len(buf)+m]; err != nil && len(buf) < n {
			return buf, truncated(err)
		}
	}
	if r.armed {
		r.armed = false
		r.nc.SetReadDeadline(time.Time{})
	}
	return buf, nil
}

// read reads what it can into p. When nothing is buffered it will wait, for at most
// the stall timeout from now: a frame that keeps arriving, however slowly, is read.
func (r *frameReader) read(p []byte) (int, error) {
	if r.br.Buffered() == 0 {
		r.armed = true
		r.nc.SetReadDeadline(time.Now().Add(r.stall))
	}
	return r.br.Read(p)
}

// truncated describes an error that cut a frame short.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("frame cut short: %w", err)
}

// Request is one batch of ops sent to the owner.
type Request struct {
	Epoch     uint64 // the sender's ring epoch
	Forwarded bool   // the hop mark: the receiver must not forward these ops again
	// Budget, when HasBudget, is how long after reading the request the owner may still
	// decide it: later, the sender has given up on it. It is a span, which each node
	// measures on its own monotonic clock, because the nodes' wall clocks may disagree
	// by any amount. Whole milliseconds on the wire, at most maxBudgetMs.
	Budget    time.Duration
	HasBudget bool
	// Deadline (unix ms; 0: none) is what senders of the previous version send instead
	// of a Budget: an owner whose wall clock reads later does not decide the request.
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

// appendRequestHead starts the body of an ops frame of n ops: req's epoch, hop mark and
// Budget (Deadline, the previous version's field, when it has none).
func appendRequestHead(b []byte, req *Request, n int) []byte {
	var flags uint8
	if req.Forwarded {
		flags |= flagForwarded
	}
	deadline := uint64(max(req.Deadline, 0))
	if req.HasBudget {
		flags |= flagBudget
		deadline = budgetBase + uint64(min(max(req.Budget.Milliseconds(), 0), maxBudgetMs))
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, req.Epoch)
	b = binary.AppendUvarint(b, deadline)
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

// count reads an element count of at most limit, bounded by the bytes left too (every
// element takes at least min bytes), so a corrupt count cannot make us allocate
// without limit.
func (d *decoder) count(what string, min, limit int) int {
	n := d.uvarint(what)
	if n > uint64(len(d.b)/min) || n > uint64(limit) {
		d.fail(what)
		return 0
	}
	return int(n)
}

// end fails a frame with bytes left over, and returns the decoder's error.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return d.err
}

// request reads an ops frame's body. Flag bits it does not know are ignored, as every
// version before did, so that a later one can add some.
func (d *decoder) request(req *Request) {
	flags := d.byte("flags")
	req.Forwarded = flags&flagForwarded != 0
	req.Epoch = d.uvarint("epoch")
	req.Deadline, req.Budget, req.HasBudget = 0, 0, flags&flagBudget != 0
	if req.HasBudget {
		req.Budget = d.budget()
	} else {
		req.Deadline = d.int63("deadline")
	}
	n := d.count("op count", 6, MaxFrameBytes) // an op with an empty key takes 6
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

// budget reads the deadline field of a frame that carries a Budget.
func (d *decoder) budget() time.Duration {
	v := d.uvarint("budget")
	if v < budgetBase || v-budgetBase > maxBudgetMs {
		d.fail("budget")
		return 0
	}
	return time.Duration(v-budgetBase) * time.Millisecond
}

func (d *decoder) results(dst []counter.Result) {
	n := d.count("result count", 2, len(dst))
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
