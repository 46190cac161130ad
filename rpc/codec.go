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

	"github.com/leapcount/leapcount/internal/wire"
)

const (
	frameRequest  uint8 = 1
	frameResponse uint8 = 2

	flagForwarded uint8 = 1 // the only flag: any other bit set is malformed

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

// Codec encodes the ops a Client carries and their results; rpc knows neither type
// (in a node they are counter's, and counter.Wire is the codec). Decoding errors stick
// in the decoder; an op is not checked here (its receiver checks every op it is given).
type Codec[O, R any] interface {
	AppendOp(b []byte, op *O) []byte
	ReadOp(d *wire.Decoder, op *O)
	AppendResult(b []byte, r *R) []byte
	ReadResult(d *wire.Decoder, r *R)
	// Expired is the result of an op the server did not decide because its time ran
	// out before it was read, or too many frames waited on its connection: certainly
	// not decided.
	Expired() R
}

// Request is one batch of ops sent to the owner.
type Request[O any] struct {
	Epoch     uint64 // the sender's ring epoch
	Forwarded bool   // the hop mark: the receiver must not forward these ops again
	// Budget is how long after reading the request the owner may still decide it:
	// later, the sender has given up on it (zero or less: it has already). It is a
	// span, which each node measures on its own monotonic clock, because the nodes'
	// wall clocks may disagree by any amount. Whole milliseconds on the wire, at most
	// maxBudgetMs.
	Budget time.Duration
	Ops    []O
}

// head is what an ops frame says of all its ops.
type head struct {
	epoch     uint64
	forwarded bool
	budget    time.Duration
}

// appendHeader starts a frame; finishFrame fills in the length once the body is written.
func appendHeader(b []byte, typ uint8, id uint64) []byte {
	b = append(b, 0, 0, 0, 0, typ)
	return binary.AppendUvarint(b, id)
}

func finishFrame(b []byte, start int) {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
}

// appendRequestHead starts the body of an ops frame of n ops: its hop mark, epoch and
// budget (none left is sent as 0).
func appendRequestHead(b []byte, h *head, n int) []byte {
	var flags uint8
	if h.forwarded {
		flags |= flagForwarded
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, h.epoch)
	b = binary.AppendUvarint(b, uint64(min(max(h.budget.Milliseconds(), 0), maxBudgetMs)))
	return binary.AppendUvarint(b, uint64(n))
}

// readRequest reads an ops frame's body into req. The ops are appended as they
// decode, so a count a frame cannot hold costs nothing.
func readRequest[O, R any](d *wire.Decoder, codec Codec[O, R], req *Request[O]) {
	flags := d.Byte("flags")
	if flags&^flagForwarded != 0 {
		d.Fail("flags")
	}
	req.Forwarded = flags&flagForwarded != 0
	req.Epoch = d.Uvarint("epoch")
	req.Budget = readBudget(d)
	n := d.Count("op count", 1, MaxFrameBytes)
	req.Ops = req.Ops[:0]
	var zero O
	for i := 0; i < n && d.Err() == nil; i++ {
		// Read in place: a local passed to the codec's method would escape, one
		// allocation per op (BenchmarkCodec).
		req.Ops = append(req.Ops, zero)
		codec.ReadOp(d, &req.Ops[len(req.Ops)-1])
	}
}

// readBudget reads an ops frame's budget.
func readBudget(d *wire.Decoder) time.Duration {
	v := d.Uvarint("budget")
	if v > maxBudgetMs {
		d.Fail("budget")
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

// readResults reads an answer's results into dst, which must be as many.
func readResults[O, R any](d *wire.Decoder, codec Codec[O, R], dst []R) {
	n := d.Count("result count", 2, len(dst))
	if n != len(dst) {
		d.Fail(fmt.Sprintf("result count %d for %d ops", n, len(dst)))
		return
	}
	for i := range dst {
		codec.ReadResult(d, &dst[i])
	}
}
