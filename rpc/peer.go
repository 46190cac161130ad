package rpc

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// call is one caller's request waiting for its answer.
type call struct {
	req     Request
	handoff *Handoff // set for a handoff call: sent on its own frame
	results []counter.Result
	done    chan error // buffered 1: whoever settles the call sends once
	// state settles the race between the answer and the caller giving up: the first to
	// move it from 0 owns results. Without it a late answer could write into a slice
	// the caller has already reused.
	state atomic.Int32
}

const (
	callWaiting int32 = iota
	callAnswered
	callAbandoned
)

// settle hands the call its outcome, unless the caller has given up.
func (c *call) settle(fill func([]counter.Result), err error) {
	if !c.state.CompareAndSwap(callWaiting, callAnswered) {
		return
	}
	if err == nil && fill != nil {
		fill(c.results)
	}
	c.done <- err
}

// peer is the connection to one node and the goroutine that writes to it.
type peer struct {
	addr  string
	cfg   Config
	stats *stats
	queue chan *call
	quit  chan struct{}
	once  sync.Once

	mu        sync.Mutex
	conn      *conn     // current connection; nil until dialed or after it failed
	downUntil time.Time // after a failed dial, calls fail at once until then
}

func newPeer(addr string, cfg Config, st *stats) *peer {
	p := &peer{addr: addr, cfg: cfg, stats: st, queue: make(chan *call, 4096), quit: make(chan struct{})}
	go p.writeLoop()
	return p
}

func (p *peer) do(ctx context.Context, cl *call) error {
	select {
	case p.queue <- cl:
	case <-p.quit:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: queue full", ErrTimeout, p.addr)
	}
	select {
	case err := <-cl.done:
		return err
	case <-ctx.Done():
		if cl.state.CompareAndSwap(callWaiting, callAbandoned) {
			// A peer that does not answer within the deadline is treated as failed:
			// dropping its connection fails the other calls waiting on it now, instead
			// of each waiting out its own deadline, and marking it down sends the next
			// calls elsewhere at once.
			// The other calls on the connection carry deadlines too: like this one, they
			// will not be decided after them, so they fail as timeouts.
			p.dropConn(fmt.Errorf("%w: %s did not answer a call on this connection", ErrTimeout, p.addr))
			p.markDown(5 * p.cfg.DownFor)
			return fmt.Errorf("%w: %s", ErrTimeout, p.addr)
		}
		return <-cl.done // answered just now: its results are complete
	}
}

func (p *peer) close() {
	p.once.Do(func() { close(p.quit) })
	p.dropConn(ErrClosed)
}

// writeLoop packs queued calls into frames and writes them. It is the only goroutine
// that writes to the peer's connection, so frames never interleave.
func (p *peer) writeLoop() {
	var (
		buf   []byte
		held  *call // a call that did not fit the last frame: it starts the next one
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	batch := make([]*call, 0, 64)
	for {
		if held != nil && p.closing() {
			held.settle(nil, ErrClosed)
			held = nil
		}
		first := held
		if first == nil {
			select {
			case first = <-p.queue:
			case <-p.quit:
				p.failQueued(ErrClosed)
				return
			}
		}
		c, err := p.connection()
		if err != nil {
			first.settle(nil, err)
			held = nil
			continue
		}
		batch, held = p.collect(append(batch[:0], first), timer, c.busy())
		buf = c.send(buf[:0], batch)
	}
}

// collect adds queued calls to batch until it holds MaxBatchOps ops, or the queue is
// empty. When busy (calls are in flight on the connection, so others are calling too)
// it waits up to Linger for more before giving up; a lone caller at low load never waits.
// A call that cannot join, because it would overfill the frame or carries another epoch
// or hop mark, is returned as held.
func (p *peer) collect(batch []*call, timer *time.Timer, busy bool) ([]*call, *call) {
	if batch[0].handoff != nil {
		return batch, nil
	}
	n := len(batch[0].req.Ops)
	lingering := false
	defer func() {
		if lingering && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}()
	for n < p.cfg.MaxBatchOps {
		var cl *call
		select {
		case cl = <-p.queue:
		default:
			if p.cfg.Linger <= 0 || !busy {
				return batch, nil
			}
			if !lingering {
				lingering = true
				timer.Reset(p.cfg.Linger)
			}
			select {
			case cl = <-p.queue:
			case <-timer.C:
				lingering = false
				return batch, nil
			}
		}
		if cl.handoff != nil || cl.req.Epoch != batch[0].req.Epoch || cl.req.Forwarded != batch[0].req.Forwarded ||
			n+len(cl.req.Ops) > p.cfg.MaxBatchOps {
			return batch, cl
		}
		batch = append(batch, cl)
		n += len(cl.req.Ops)
	}
	return batch, nil
}

func (p *peer) closing() bool {
	select {
	case <-p.quit:
		return true
	default:
		return false
	}
}

func (p *peer) failQueued(err error) {
	for {
		select {
		case cl := <-p.queue:
			cl.settle(nil, err)
		default:
			return
		}
	}
}

// connection returns the live connection, dialing one if needed.
func (p *peer) connection() (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		return p.conn, nil
	}
	if time.Now().Before(p.downUntil) {
		return nil, fmt.Errorf("%w: %s is down", ErrPeerUnreachable, p.addr)
	}
	nc, err := net.DialTimeout("tcp", p.addr, p.cfg.DialTimeout)
	if err != nil {
		p.downUntil = time.Now().Add(p.cfg.DownFor)
		return nil, fmt.Errorf("%w: %v", ErrPeerUnreachable, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	p.conn = newConn(nc, p)
	return p.conn, nil
}

// markDown makes calls fail at once, unsent, for d.
func (p *peer) markDown(d time.Duration) {
	p.mu.Lock()
	p.downUntil = time.Now().Add(d)
	p.mu.Unlock()
}

// dropConn closes the current connection (if any), failing its calls in flight with
// err (ErrConnectionLost when nil).
func (p *peer) dropConn(err error) {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		c.fail(err)
	}
}

// forgetConn clears c as the current connection if it still is.
func (p *peer) forgetConn(c *conn) {
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
	}
	p.mu.Unlock()
}

// conn is one TCP connection with the calls in flight on it.
type conn struct {
	nc   net.Conn
	peer *peer
	bw   *bufio.Writer

	mu       sync.Mutex
	nextID   uint64
	inflight map[uint64][]*call
	failed   error
}

func newConn(nc net.Conn, p *peer) *conn {
	c := &conn{nc: nc, peer: p, bw: bufio.NewWriterSize(nc, 64<<10), inflight: map[uint64][]*call{}}
	go c.readLoop()
	return c
}

// busy reports whether calls are waiting for answers on this connection.
func (c *conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) > 0
}

// send writes one frame holding batch and registers it in flight. Only the peer's
// write loop calls it.
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
	c.nextID++
	id := c.nextID
	c.inflight[id] = append([]*call(nil), batch...)
	c.mu.Unlock()

	n := 0
	if h := batch[0].handoff; h != nil {
		buf = appendHeader(buf, frameHandoff, id)
		buf = appendHandoff(buf, h)
	} else {
		for _, cl := range batch {
			n += len(cl.req.Ops)
		}
		buf = appendHeader(buf, frameRequest, id)
		// Half the timeout: an answer decided by then still has the other half to arrive.
		deadline := time.Now().Add(c.peer.cfg.Timeout / 2).UnixMilli()
		buf = appendRequestHead(buf, batch[0].req.Epoch, batch[0].req.Forwarded, deadline, n)
		for _, cl := range batch {
			for i := range cl.req.Ops {
				buf = appendOp(buf, &cl.req.Ops[i])
			}
		}
	}
	finishFrame(buf, 0)
	c.peer.stats.frames.Add(1)
	c.peer.stats.ops.Add(uint64(n))
	c.nc.SetWriteDeadline(time.Now().Add(c.peer.cfg.Timeout))
	_, err := c.bw.Write(buf)
	if err == nil && len(c.peer.queue) == 0 {
		err = c.bw.Flush() // nothing more to add: send now
	}
	if err != nil {
		c.peer.forgetConn(c)
		c.fail(fmt.Errorf("%w: %v", ErrConnectionLost, err))
	}
	return buf
}

// readLoop reads answers and hands each frame's results to its calls.
func (c *conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var frame []byte
	var results []counter.Result
	for {
		var err error
		if frame, err = readFrame(br, frame); err != nil {
			c.peer.forgetConn(c)
			c.fail(fmt.Errorf("%w: %v", ErrConnectionLost, err))
			return
		}
		if err = c.deliver(frame, &results); err != nil {
			c.peer.forgetConn(c)
			c.fail(err)
			return
		}
	}
}

func (c *conn) deliver(frame []byte, scratch *[]counter.Result) error {
	d := decoder{b: frame}
	typ := d.byte("type")
	if typ != frameResponse && typ != frameHandoffAck && d.err == nil {
		return fmt.Errorf("%w: type %d, want a response", ErrBadFrame, typ)
	}
	id := d.uvarint("id")
	c.mu.Lock()
	calls, ok := c.inflight[id]
	delete(c.inflight, id)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: answer to unknown request %d", ErrBadFrame, id)
	}
	if typ == frameHandoffAck {
		err := decodeHandoffAck(&d)
		for _, cl := range calls {
			cl.settle(nil, err)
		}
		return nil
	}
	n := 0
	for _, cl := range calls {
		n += len(cl.req.Ops)
	}
	*scratch = resize(*scratch, n)
	d.results(*scratch)
	if d.err != nil {
		for _, cl := range calls {
			cl.settle(nil, d.err)
		}
		return d.err
	}
	off := 0
	for _, cl := range calls {
		part := (*scratch)[off : off+len(cl.req.Ops)]
		off += len(cl.req.Ops)
		cl.settle(func(dst []counter.Result) { copy(dst, part) }, nil)
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
	c.inflight = map[uint64][]*call{}
	c.mu.Unlock()
	c.nc.Close()
	for _, calls := range inflight {
		for _, cl := range calls {
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
