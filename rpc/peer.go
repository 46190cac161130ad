package rpc

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// call is one caller's request waiting for its answer: ops, or a message of its own
// kind (Send).
type call[O, R any] struct {
	req     Request[O]
	results []R
	// kind, when not 0, makes the call a message: body goes on a frame of its own, and
	// read decodes its answer.
	kind     Kind
	body     []byte
	read     func(d *wire.Decoder) error
	deadline time.Time  // the caller's, bounded by Config.Timeout
	done     chan error // buffered 1: whoever settles the call sends once (Do's)
	// then, instead of done, is Go's: called once with the outcome by whoever settles
	// the call, and by expiry (the Timeout bound) if nobody has.
	then   func(error)
	expiry *time.Timer
	// started and opDone time an op call for Config.OpDone (opDone nil: not timed).
	started time.Time
	opDone  func(time.Duration)

	// state settles the races between the writer sending the call, its answer, and the
	// caller giving up. A call moves from queued to sent (the writer put it in a frame)
	// and from either to settled (its outcome is handed over) or abandoned (the caller
	// gave up); the first to move it owns what follows. Without it a late answer could
	// write into a slice the caller has already reused, and a call given up while
	// queued could still be sent.
	state atomic.Int32
	// conn and id name the frame the call went out in. The writer sets them before it
	// marks the call sent, and the caller reads them only after it saw it sent.
	conn *conn[O, R]
	id   uint64
}

const (
	callQueued int32 = iota
	callSent
	callSettled
	callAbandoned
)

// solo reports whether the call goes on a frame of its own.
func (c *call[O, R]) solo() bool { return c.kind != 0 }

// settle hands the call its outcome (fill, on success, sets its answer), unless the
// caller has given up.
func (c *call[O, R]) settle(fill func(*call[O, R]), err error) {
	if !c.state.CompareAndSwap(callQueued, callSettled) && !c.state.CompareAndSwap(callSent, callSettled) {
		return
	}
	if err == nil && fill != nil {
		fill(c)
	}
	c.finish(err)
}

// finish hands the outcome to whoever waits for it; only the one who moved the call
// to settled or abandoned calls it.
func (c *call[O, R]) finish(err error) {
	if c.opDone != nil {
		c.opDone(time.Since(c.started))
	}
	if c.then == nil {
		c.done <- err
		return
	}
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.then(err)
}

// peer is the connection to one node and the goroutine that writes to it.
type peer[O, R any] struct {
	addr  string
	cfg   Config
	codec Codec[O, R]
	stats *stats
	queue chan *call[O, R]
	// ctx ends when the peer is forgotten or the client closed: the writer stops, and a
	// dial in progress is abandoned.
	ctx  context.Context
	stop context.CancelFunc

	downUntil atomic.Int64 // unix ns: after a failed dial, calls fail at once, unsent, until then (0: not down)
	// silentUntil (unix ns; 0: none) is MarkDown's: op calls fail at once, unsent, until
	// then. Heartbeats still go, or two nodes that marked each other down would never
	// hear from each other again.
	silentUntil atomic.Int64

	mu   sync.Mutex
	conn *conn[O, R] // current connection; nil until dialed or after it failed
}

func newPeer[O, R any](addr string, cfg Config, codec Codec[O, R], st *stats) *peer[O, R] {
	p := &peer[O, R]{addr: addr, cfg: cfg, codec: codec, stats: st, queue: make(chan *call[O, R], 4096)}
	p.ctx, p.stop = context.WithCancel(context.Background())
	go p.writeLoop()
	return p
}

// do queues cl and waits for its outcome, or for ctx to end or expire to fire (the
// Timeout bound): then the call is abandoned (its answer, if one comes, is dropped) and
// the connection goes on.
func (p *peer[O, R]) do(ctx context.Context, expire <-chan time.Time, cl *call[O, R]) error {
	if err := p.downErr(); err != nil {
		return err
	}
	if err := p.silentErr(cl); err != nil {
		return err
	}
	select {
	case p.queue <- cl:
	case <-p.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		return p.abandon(ctx.Err(), cl)
	case <-expire:
		return p.abandon(context.DeadlineExceeded, cl)
	}
	select {
	case err := <-cl.done:
		return err
	case <-ctx.Done():
		return p.abandon(ctx.Err(), cl)
	case <-expire:
		return p.abandon(context.DeadlineExceeded, cl)
	case <-p.ctx.Done():
		// The writer may be gone, and a call still queued would wait in vain; one
		// already sent is failed with its connection.
		if cl.state.CompareAndSwap(callQueued, callAbandoned) {
			return ErrClosed
		}
		select {
		case err := <-cl.done:
			return err
		case <-ctx.Done():
			return p.abandon(ctx.Err(), cl)
		case <-expire:
			return p.abandon(context.DeadlineExceeded, cl)
		}
	}
}

// start queues cl, a call of Go's, without waiting: its outcome goes to cl.then, from
// whoever settles it, or from its expiry at its deadline.
func (p *peer[O, R]) start(cl *call[O, R]) {
	err := p.downErr()
	if err == nil {
		err = p.silentErr(cl)
	}
	if err == nil && p.ctx.Err() != nil {
		err = ErrClosed
	}
	if err != nil {
		cl.then(err)
		return
	}
	// Armed before the call is queued, so no path leaves it unbounded; it loses to a
	// settle in the state's race, and settle stops it.
	cl.expiry = time.AfterFunc(time.Until(cl.deadline), func() { p.expire(cl) })
	select {
	case p.queue <- cl:
	default:
		p.refuse(cl)
	}
}

// refuse fails a call of Go's that found the queue full, unsent: its caller must not
// wait (it is an event loop), and a goroutine waiting for room per call would grow
// without bound while the peer is slow. The call races only its expiry, by the state
// giveUp uses, so exactly one of them hands over its outcome.
func (p *peer[O, R]) refuse(cl *call[O, R]) {
	if cl.state.CompareAndSwap(callQueued, callAbandoned) {
		cl.finish(fmt.Errorf("%w: %s: queue full (%d calls waiting): not sent", ErrPeerUnreachable, p.addr, cap(p.queue)))
	}
}

// expire gives up a call of Go's at its deadline, unless it was settled first.
func (p *peer[O, R]) expire(cl *call[O, R]) {
	if err, ok := p.giveUp(context.DeadlineExceeded, cl); ok {
		cl.then(err)
	}
}

// abandon gives up cl for its caller, whose call ended with cause (its ctx's error, or
// DeadlineExceeded at the Timeout bound), and says what became of it.
func (p *peer[O, R]) abandon(cause error, cl *call[O, R]) error {
	if err, ok := p.giveUp(cause, cl); ok {
		return err
	}
	return <-cl.done // settled just now: its answer is complete
}

// giveUp moves cl to abandoned, unless it was settled, and says what became of it; ok
// is false when it was settled (its outcome is on its way to the caller).
func (p *peer[O, R]) giveUp(cause error, cl *call[O, R]) (err error, ok bool) {
	switch {
	case cl.state.CompareAndSwap(callQueued, callAbandoned):
		return fmt.Errorf("%w: %s: not sent before the call ended: %w", ErrPeerUnreachable, p.addr, cause), true
	case cl.state.CompareAndSwap(callSent, callAbandoned):
		cl.conn.release(cl.id)
		if errors.Is(cause, context.DeadlineExceeded) {
			return fmt.Errorf("%w: %s: %w", ErrTimeout, p.addr, cause), true
		}
		return fmt.Errorf("rpc: %s: call given up after it was sent (outcome unknown): %w", p.addr, cause), true
	}
	return nil, false
}

// silentErr is ErrPeerUnreachable for a call other than a heartbeat while MarkDown
// says the peer does not answer.
func (p *peer[O, R]) silentErr(cl *call[O, R]) error {
	if u := p.silentUntil.Load(); cl.kind != KindHeartbeat && u != 0 && time.Now().UnixNano() < u {
		return fmt.Errorf("%w: %s is marked down", ErrPeerUnreachable, p.addr)
	}
	return nil
}

// downErr is ErrPeerUnreachable while the peer is marked down after a failed dial.
func (p *peer[O, R]) downErr() error {
	if u := p.downUntil.Load(); u != 0 && time.Now().UnixNano() < u {
		return fmt.Errorf("%w: %s is marked down", ErrPeerUnreachable, p.addr)
	}
	return nil
}

// markDownFor marks the peer down for d from now, unless it already is for longer.
func (p *peer[O, R]) markDownFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := p.downUntil.Load()
		if cur >= until || p.downUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (p *peer[O, R]) close() {
	p.stop()
	p.dropConn(ErrClosed)
}

// writeLoop packs queued calls into frames and writes them. It is the only goroutine
// that writes to the peer's connection, so frames never interleave.
func (p *peer[O, R]) writeLoop() {
	var (
		buf   []byte
		last  *conn[O, R] // where the last frame went: flushed before waiting
		held  *call[O, R] // a call that did not fit the last frame: it starts the next one
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	batch := make([]*call[O, R], 0, 64)
	for {
		first := held
		held = nil
		if first == nil {
			if first = p.next(last); first == nil {
				p.failQueued(ErrClosed)
				return
			}
		}
		if first.state.Load() == callAbandoned {
			continue // its caller gave up before it was sent: it never will be
		}
		if err := p.silentErr(first); err != nil {
			first.settle(nil, err)
			continue
		}
		c, err := p.connection()
		if err != nil {
			first.settle(nil, err)
			continue
		}
		batch, held = p.collect(append(batch[:0], first), timer, c)
		buf = c.send(buf[:0], batch)
		if cap(buf) > 1<<20 {
			buf = nil // a handoff's buffer: do not keep megabytes per peer
		}
		last = c
	}
}

// next returns the next queued call, or nil once the peer is closed. When the queue is
// empty it first flushes what was written to c: nothing more is coming to join it.
func (p *peer[O, R]) next(c *conn[O, R]) *call[O, R] {
	if cl := p.poll(); cl != nil {
		return cl
	}
	if c != nil {
		c.flush()
	}
	select {
	case cl := <-p.queue:
		return cl
	case <-p.ctx.Done():
		return nil
	}
}

// collect adds queued calls to batch until it holds MaxBatchOps ops, or the queue is
// empty and await says the frame goes now. A call that cannot join, because it would
// overfill the frame, goes on a frame of its own, or carries another epoch or hop mark,
// is returned as held.
func (p *peer[O, R]) collect(batch []*call[O, R], timer *time.Timer, c *conn[O, R]) ([]*call[O, R], *call[O, R]) {
	if batch[0].solo() {
		return batch, nil
	}
	n := len(batch[0].req.Ops)
	w := waitTimer{t: timer}
	defer w.stop()
	for n < p.cfg.MaxBatchOps {
		cl := p.poll()
		if cl == nil {
			if cl = p.await(c, &w); cl == nil {
				return batch, nil
			}
		}
		if cl.state.Load() == callAbandoned {
			continue
		}
		if err := p.silentErr(cl); err != nil {
			cl.settle(nil, err)
			continue
		}
		if cl.solo() || cl.req.Epoch != batch[0].req.Epoch || cl.req.Forwarded != batch[0].req.Forwarded ||
			n+len(cl.req.Ops) > p.cfg.MaxBatchOps {
			return batch, cl
		}
		batch = append(batch, cl)
		n += len(cl.req.Ops)
	}
	return batch, nil
}

// await waits, with nothing queued, for a call to join a part-full frame, and returns
// nil when the frame goes now. It waits while InFlight op frames or more wait for their
// answers on c (others are calling too, and a frame sent now would carry few ops), up to
// Linger or until an answer comes, which lets the next frame go; a lone caller at low
// load never waits.
func (p *peer[O, R]) await(c *conn[O, R], w *waitTimer) *call[O, R] {
	for {
		if p.cfg.Linger <= 0 || c.opFrames() < p.cfg.InFlight {
			return nil
		}
		if !w.armed {
			c.flush() // the frames waited for must be on the wire to be answered
			w.arm(p.cfg.Linger)
		}
		select {
		case cl := <-p.queue:
			return cl
		case <-c.answered:
			continue // fewer frames in flight now, perhaps few enough
		case <-w.t.C:
			w.armed = false
			return nil
		case <-p.ctx.Done():
			return nil
		}
	}
}

// waitTimer is the writer's one timer, armed at most once per frame.
type waitTimer struct {
	t     *time.Timer
	armed bool
}

func (w *waitTimer) arm(d time.Duration) {
	w.armed = true
	w.t.Reset(d)
}

// stop disarms the timer; since Go 1.23 no value sent before Stop is received after.
func (w *waitTimer) stop() {
	if w.armed {
		w.t.Stop()
	}
}

// poll returns a queued call, or nil when none is queued even after the writer let every
// goroutine ready to run go first: those are callers on their way to queue a call (the
// front ends' handlers of calls read in the same batch), and a frame that waits for
// them costs one write and one wake-up on each node instead of one per call, where a
// timer (Linger) would wait also when nobody is coming.
func (p *peer[O, R]) poll() *call[O, R] {
	for yielded := false; ; yielded = true {
		select {
		case cl := <-p.queue:
			return cl
		default:
		}
		if yielded {
			return nil
		}
		runtime.Gosched()
	}
}

func (p *peer[O, R]) failQueued(err error) {
	for {
		select {
		case cl := <-p.queue:
			cl.settle(nil, err)
		default:
			return
		}
	}
}

// connection returns the live connection, dialing one if needed. Only the writer
// calls it, so there is one dial at a time; it dials without holding p.mu, so that
// Forget, Close and the readers' clean-up never wait for a dial.
func (p *peer[O, R]) connection() (*conn[O, R], error) {
	if p.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if err := p.downErr(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	nc, err := p.cfg.Dial(ctx, p.addr)
	cancel()
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, ErrClosed
		}
		p.markDownFor(p.cfg.DownFor)
		return nil, fmt.Errorf("%w: %s: %v", ErrPeerUnreachable, p.addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Checked under p.mu: close cancels ctx before it takes p.conn, so either it finds
	// this connection there or this sees ctx ended.
	if p.ctx.Err() != nil {
		nc.Close()
		return nil, ErrClosed
	}
	p.conn = newConn(nc, p)
	return p.conn, nil
}

// dropConn closes the current connection (if any), failing its calls in flight with
// err (ErrConnectionLost when nil).
func (p *peer[O, R]) dropConn(err error) {
	p.mu.Lock()
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		c.fail(err)
	}
}

// forgetConn clears c as the current connection if it still is.
func (p *peer[O, R]) forgetConn(c *conn[O, R]) {
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
	}
	p.mu.Unlock()
}
