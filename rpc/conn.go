package rpc

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// conn is one connection to a peer with the frames in flight on it.
type conn struct {
	nc   net.Conn
	peer *peer
	bw   *bufio.Writer // only the peer's writer uses it

	// answered gets a token whenever an op frame leaves inflight (answered, given up
	// or failed), for the writer waiting for fewer frames in flight (peer.collect).
	answered chan struct{}

	mu       sync.Mutex
	nextID   uint64 // the last frame id used
	inflight map[uint64]*pending
	ops      int // op frames in inflight
	failed   error
}

// pending is one frame in flight: its calls, in order, and how many of them still
// wait for its answer.
type pending struct {
	answer uint8 // the type its answer must have
	calls  []*call
	live   int
}

func newConn(nc net.Conn, p *peer) *conn {
	c := &conn{nc: nc, peer: p, bw: bufio.NewWriterSize(nc, 64<<10), inflight: map[uint64]*pending{}, answered: make(chan struct{}, 1)}
	go c.readLoop()
	return c
}

// opFrames is how many op frames wait for their answers on this connection.
func (c *conn) opFrames() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// forget takes frame id out of inflight (c.mu held).
func (c *conn) forget(id uint64, f *pending) {
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
func (c *conn) send(buf []byte, batch []*call) []byte {
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
	f := &pending{answer: answerType(calls[0]), calls: calls, live: len(calls)}
	c.inflight[id] = f
	if f.answer == frameResponse {
		c.ops++
	}
	// c.mu is held while the calls' ops are encoded: a call given up (expiry, release)
	// or failed (fail) meanwhile hands its ops back to its caller only after.

	n := 0
	switch first := calls[0]; {
	case first.handoff != nil:
		buf = appendHeader(buf, frameHandoff, id)
		buf = appendHandoff(buf, first.handoff)
	case first.lease != nil:
		buf = appendHeader(buf, frameLease, id)
		buf = appendLeaseRequest(buf, first.lease)
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
		head := Request{Epoch: first.req.Epoch, Forwarded: first.req.Forwarded, Budget: time.Until(deadline), HasBudget: true}
		buf = appendHeader(buf, frameRequest, id)
		buf = appendRequestHead(buf, &head, n)
		for _, cl := range calls {
			for i := range cl.req.Ops {
				buf = appendOp(buf, &cl.req.Ops[i])
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
func answerType(cl *call) uint8 {
	switch {
	case cl.handoff != nil:
		return frameHandoffAck
	case cl.lease != nil:
		return frameLeaseReply
	}
	return frameResponse
}

// flush sends what is buffered.
func (c *conn) flush() {
	if c.bw.Buffered() == 0 {
		return
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.peer.cfg.Timeout))
	if err := c.bw.Flush(); err != nil {
		c.lost(err)
	}
}

// lost fails the connection after an I/O error or a malformed answer.
func (c *conn) lost(err error) {
	c.peer.forgetConn(c)
	c.fail(c.lostErr(err))
}

func (c *conn) lostErr(err error) error {
	return fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.peer.addr, err)
}

// release drops a call whose caller gave up from its frame in flight; the frame is
// forgotten once none of its calls is wanted, so a peer that never answers does not
// make the map grow.
func (c *conn) release(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.inflight[id]; f != nil {
		if f.live--; f.live == 0 {
			c.forget(id, f)
		}
	}
}

// readLoop reads answers and hands each frame's results to its calls.
func (c *conn) readLoop() {
	fr := newFrameReader(c.nc, frameStall)
	var frame []byte
	var results []counter.Result
	for {
		var err error
		if frame, err = fr.next(frame); err != nil {
			c.lost(err)
			return
		}
		if err = c.deliver(frame, &results); err != nil {
			c.peer.forgetConn(c)
			c.fail(err)
			return
		}
	}
}

// deliver hands an answer frame to its calls. An error means the frame was malformed
// (its calls have it already): the connection must be dropped.
func (c *conn) deliver(frame []byte, scratch *[]counter.Result) error {
	d := decoder{b: frame}
	typ := d.byte("type")
	id := d.uvarint("id")
	if d.err != nil {
		return c.lostErr(d.err)
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
		err = c.settle(f, &d, scratch)
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
func (c *conn) settle(f *pending, d *decoder, scratch *[]counter.Result) error {
	switch f.answer {
	case frameHandoffAck:
		err := decodeHandoffAck(d)
		if d.end() != nil {
			return d.err
		}
		f.calls[0].settle(nil, err)
		return nil
	case frameLeaseReply:
		rep, err := d.leaseAnswer()
		if d.end() != nil {
			return d.err
		}
		f.calls[0].settle(func(cl *call) { cl.reply = rep }, err)
		return nil
	}
	n := 0
	for _, cl := range f.calls {
		n += len(cl.req.Ops)
	}
	*scratch = resize(*scratch, n)
	d.results(*scratch)
	if d.end() != nil {
		return d.err
	}
	off := 0
	for _, cl := range f.calls {
		part := (*scratch)[off : off+len(cl.req.Ops)]
		off += len(cl.req.Ops)
		cl.settle(func(cl *call) { copy(cl.results, part) }, nil)
	}
	return nil
}

// fail closes the connection and settles every call in flight with err.
func (c *conn) fail(err error) {
	if err == nil {
		err = fmt.Errorf("%w: connection dropped", ErrConnectionLost)
	}
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	inflight := c.inflight
	c.inflight = map[uint64]*pending{}
	c.ops = 0
	c.mu.Unlock()
	c.nc.Close()
	for _, f := range inflight {
		for _, cl := range f.calls {
			cl.settle(nil, err)
		}
	}
}

// resize returns rs with length n, zeroed, reusing its memory when it can.
func resize(rs []counter.Result, n int) []counter.Result {
	if cap(rs) < n {
		return make([]counter.Result, n)
	}
	rs = rs[:n]
	clear(rs)
	return rs
}
