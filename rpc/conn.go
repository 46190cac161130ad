package rpc

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// conn is one connection to a peer with the frames in flight on it.
type conn[O, R any] struct {
	nc   net.Conn
	peer *peer[O, R]
	bw   *bufio.Writer // only the peer's writer uses it

	// answered gets a token whenever an op frame leaves inflight (answered, given up
	// or failed), for the writer waiting for fewer frames in flight (peer.collect).
	answered chan struct{}

	mu       sync.Mutex
	nextID   uint64 // the last frame id used
	inflight map[uint64]*pending[O, R]
	ops      int // op frames in inflight
	failed   error
}

// pending is one frame in flight: its calls, in order, and how many of them still
// wait for its answer.
type pending[O, R any] struct {
	answer uint8 // the type its answer must have
	calls  []*call[O, R]
	live   int
}

func newConn[O, R any](nc net.Conn, p *peer[O, R]) *conn[O, R] {
	c := &conn[O, R]{nc: nc, peer: p, bw: bufio.NewWriterSize(nc, 64<<10), inflight: map[uint64]*pending[O, R]{}, answered: make(chan struct{}, 1)}
	go c.readLoop()
	return c
}

// opFrames is how many op frames wait for their answers on this connection.
func (c *conn[O, R]) opFrames() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// forget takes frame id out of inflight (c.mu held).
func (c *conn[O, R]) forget(id uint64, f *pending[O, R]) {
	delete(c.inflight, id)
	if f.answer == frameResponse {
		c.ops--
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
}

// send writes one frame holding the calls of batch that are still wanted, and
// registers it in flight. Only the peer's writer calls it; the frame goes out at the
// writer's next flush (or sooner, when the buffer fills).
func (c *conn[O, R]) send(buf []byte, batch []*call[O, R]) []byte {
	c.mu.Lock()
	if c.failed != nil {
		err := c.failed
		c.mu.Unlock()
		for _, cl := range batch {
			cl.settle(nil, err)
		}
		return buf
	}
	id := c.nextID + 1
	calls := batch[:0:0]
	for _, cl := range batch {
		cl.conn, cl.id = c, id
		// Claimed under c.mu, with the frame registered in the same step: a caller that
		// gives the call up after this finds its frame in flight to release.
		if cl.state.CompareAndSwap(callQueued, callSent) {
			calls = append(calls, cl)
		}
	}
	if len(calls) == 0 {
		c.mu.Unlock()
		return buf
	}
	c.nextID = id
	f := &pending[O, R]{answer: answerType(calls[0]), calls: calls, live: len(calls)}
	c.inflight[id] = f
	if f.answer == frameResponse {
		c.ops++
	}
	// c.mu is held while the calls' ops are encoded: a call given up (expiry, release)
	// or failed (fail) meanwhile hands its ops back to its caller only after.

	n := 0
	switch first := calls[0]; {
	case first.solo():
		buf = appendHeader(buf, uint8(first.kind), id)
		buf = append(buf, first.body...)
	default:
		// The frame's budget is the time left to its calls' earliest deadline: the owner
		// must not decide any of them after its caller has given up.
		deadline := first.deadline
		for _, cl := range calls {
			n += len(cl.req.Ops)
			if cl.deadline.Before(deadline) {
				deadline = cl.deadline
			}
		}
		h := head{epoch: first.req.Epoch, forwarded: first.req.Forwarded, budget: time.Until(deadline)}
		buf = appendHeader(buf, frameRequest, id)
		buf = appendRequestHead(buf, &h, n)
		for _, cl := range calls {
			for i := range cl.req.Ops {
				buf = c.peer.codec.AppendOp(buf, &cl.req.Ops[i])
			}
		}
	}
	finishFrame(buf, 0)
	c.mu.Unlock()
	c.peer.stats.frames.Add(1)
	c.peer.stats.ops.Add(uint64(n))
	c.nc.SetWriteDeadline(time.Now().Add(c.peer.cfg.Timeout))
	if _, err := c.bw.Write(buf); err != nil {
		c.lost(err)
	}
	return buf
}

// answerType is the frame type that answers a frame starting with cl.
func answerType[O, R any](cl *call[O, R]) uint8 {
	if cl.solo() {
		return uint8(cl.kind) + 1
	}
	return frameResponse
}

// flush sends what is buffered.
func (c *conn[O, R]) flush() {
	if c.bw.Buffered() == 0 {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.peer.cfg.Timeout))
	if err := c.bw.Flush(); err != nil {
		c.lost(err)
	}
}

// lost fails the connection after an I/O error or a malformed answer.
func (c *conn[O, R]) lost(err error) {
	c.peer.forgetConn(c)
	c.fail(c.lostErr(err))
}

func (c *conn[O, R]) lostErr(err error) error {
	return fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.peer.addr, err)
}

// release drops a call whose caller gave up from its frame in flight; the frame is
// forgotten once none of its calls is wanted, so a peer that never answers does not
// make the map grow.
func (c *conn[O, R]) release(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.inflight[id]; f != nil {
		if f.live--; f.live == 0 {
			c.forget(id, f)
		}
	}
}

// readLoop reads answers and hands each frame's results to its calls.
func (c *conn[O, R]) readLoop() {
	fr := newFrameReader(c.nc, frameStall)
	var frame []byte
	var results []R
	// One decoder for every answer: a decoder made per frame escapes through the
	// codec's methods, an allocation per frame (BenchmarkForwarding).
	var d wire.Decoder
	for {
		var err error
		if frame, err = fr.next(frame); err != nil {
			c.lost(err)
			return
		}
		d = wire.NewDecoder(frame)
		if err = c.deliver(&d, &results); err != nil {
			c.peer.forgetConn(c)
			c.fail(err)
			return
		}
	}
}

// deliver hands an answer frame to its calls. An error means the frame was malformed
// (its calls have it already): the connection must be dropped.
func (c *conn[O, R]) deliver(d *wire.Decoder, scratch *[]R) error {
	typ := d.Byte("type")
	id := d.Uvarint("id")
	if d.Err() != nil {
		return c.lostErr(d.Err())
	}
	c.mu.Lock()
	f := c.inflight[id]
	if f != nil {
		c.forget(id, f)
	}
	issued := id != 0 && id <= c.nextID
	c.mu.Unlock()
	switch {
	case f == nil && issued:
		return nil // every caller of that frame gave up: its late answer is dropped
	case f == nil:
		return c.lostErr(fmt.Errorf("%w: answer to unknown request %d", ErrBadFrame, id))
	}
	var err error
	if typ == f.answer {
		err = c.settle(f, d, scratch)
	} else {
		err = fmt.Errorf("%w: answer of type %d to a frame answered by type %d", ErrBadFrame, typ, f.answer)
	}
	if err != nil {
		err = c.lostErr(err)
		for _, cl := range f.calls {
			cl.settle(nil, err)
		}
		return err
	}
	return nil
}

// settle decodes the answer to f and hands each call its part.
func (c *conn[O, R]) settle(f *pending[O, R], d *wire.Decoder, scratch *[]R) error {
	if f.answer != frameResponse {
		return settleMessage(f.calls[0], d)
	}
	n := 0
	for _, cl := range f.calls {
		n += len(cl.req.Ops)
	}
	*scratch = resize(*scratch, n)
	readResults(d, c.peer.codec, *scratch)
	if err := d.End(); err != nil {
		return err
	}
	off := 0
	for _, cl := range f.calls {
		part := (*scratch)[off : off+len(cl.req.Ops)]
		off += len(cl.req.Ops)
		cl.settle(func(cl *call[O, R]) { copy(cl.results, part) }, nil)
	}
	return nil
}

// fail closes the connection and settles every call in flight with err.
func (c *conn[O, R]) fail(err error) {
	if err == nil {
		err = fmt.Errorf("%w: connection dropped", ErrConnectionLost)
	}
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	inflight := c.inflight
	c.inflight = map[uint64]*pending[O, R]{}
	c.ops = 0
	c.mu.Unlock()
	c.nc.Close()
	for _, f := range inflight {
		for _, cl := range f.calls {
			cl.settle(nil, err)
		}
	}
}

// settleMessage hands a message's call its answer, decoded by the call's read (its
// error is the call's outcome), unless its caller gave up: then the answer is dropped
// unread, since read may write where the caller no longer looks. An error means the
// answer was malformed: the connection must be dropped.
func settleMessage[O, R any](cl *call[O, R], d *wire.Decoder) error {
	if !cl.state.CompareAndSwap(callSent, callSettled) {
		return nil
	}
	err := cl.read(d)
	if bad := d.End(); bad != nil {
		cl.finish(fmt.Errorf("%w: %w", ErrConnectionLost, bad))
		return bad
	}
	cl.finish(err)
	return nil
}

// resize returns rs with length n, zeroed, reusing its memory when it can.
func resize[R any](rs []R, n int) []R {
	if cap(rs) < n {
		return make([]R, n)
	}
	rs = rs[:n]
	clear(rs)
	return rs
}
