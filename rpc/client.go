package rpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// Config shapes a Client. Zero fields take the defaults below.
type Config struct {
	Timeout     time.Duration // bound on every call, whatever the caller's context says (default 1s)
	DialTimeout time.Duration // default 500ms
	MaxBatchOps int           // ops in one frame at most (default 512; 1 turns batching off)
	// Linger is how long a writer with a part-full frame waits for more ops, or for an
	// answer, while InFlight op frames or more wait for their answers on the connection
	// (default 20µs; negative: never wait). Fuller frames cost less CPU per op than
	// sending as soon as the queue is empty (BenchmarkForward: batching=on against
	// batching=on,linger=0).
	Linger time.Duration
	// InFlight is how many op frames may wait for their answers on one connection
	// before the next part-full frame lingers (default 1).
	InFlight int
	// DownFor is how long after a failed dial calls to that peer fail at once
	// (ErrPeerUnreachable: not sent) instead of dialing again (default 200ms): a dead
	// peer then costs callers nothing, and they fall back at once. A peer that accepts
	// connections but does not answer (frozen) is not marked down by a timeout: one
	// caller giving up says nothing about the others' calls. MarkDown does it, for
	// whoever knows better (a lease keeper whose heartbeats go unanswered).
	DownFor time.Duration
	// Dial opens a connection to addr (nil: a net.Dialer, TCP). The context ends after
	// DialTimeout, or when the peer is forgotten or the client closed. Tests plug in an
	// in-process network here.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// OpDone, when set, hears how long each op call (Do or Go) took from its start to
	// its outcome, whatever that was: an operator's forwarding latency. It is called on
	// the goroutine that settles the call and must not block.
	OpDone func(time.Duration)
}

// WithDefaults is c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 500 * time.Millisecond
	}
	if c.MaxBatchOps <= 0 {
		c.MaxBatchOps = 512
	}
	if c.Linger == 0 {
		c.Linger = 20 * time.Microsecond
	}
	if c.InFlight <= 0 {
		c.InFlight = 1
	}
	if c.DownFor <= 0 {
		c.DownFor = 200 * time.Millisecond
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return c
}

// Client sends ops (of type O, answered with results of type R, encoded by its Codec)
// and messages to peers. It is safe for concurrent use.
type Client[O, R any] struct {
	cfg    Config
	codec  Codec[O, R]
	stats  stats
	mu     sync.Mutex
	peers  map[string]*peer[O, R]
	closed bool
}

// NewClient returns a client with no connections yet; they are dialed on first use.
func NewClient[O, R any](cfg Config, codec Codec[O, R]) *Client[O, R] {
	return &Client[O, R]{cfg: cfg.WithDefaults(), codec: codec, peers: map[string]*peer[O, R]{}}
}

// Do sends req to the node at addr and fills results (len(req.Ops)) with its answers.
// The error is for the whole call (peer unreachable, timeout, closed; see the package
// documentation for what each says about the outcome); per-op failures, such as
// ErrNotOwner, come back in each result's Err. The request's deadline, which the owner
// keeps to, is ctx's bounded by Config.Timeout (req's Budget is ignored).
func (c *Client[O, R]) Do(ctx context.Context, addr string, req Request[O], results []R) error {
	if len(req.Ops) == 0 {
		return nil
	}
	if len(results) != len(req.Ops) {
		return fmt.Errorf("rpc: %d results for %d ops", len(results), len(req.Ops))
	}
	return c.call(ctx, addr, &call[O, R]{req: req, results: results, started: c.opStart(), opDone: c.cfg.OpDone})
}

// Go sends req as Do does, without waiting: done gets what Do would have returned,
// once, with results filled when it is nil. It is called from another goroutine (the
// connection's reader, or a timer at the deadline), or from this one when the call
// fails at once (as when the peer's queue is full: ErrPeerUnreachable, not sent); it
// must not block. ctx's deadline bounds the call; its cancellation after Go returns is
// not watched (Config.Timeout bounds the call whatever happens).
// An event loop forwards with Go, where Do would need a goroutine per batch.
func (c *Client[O, R]) Go(ctx context.Context, addr string, req Request[O], results []R, done func(error)) {
	switch {
	case len(req.Ops) == 0:
		done(nil)
		return
	case len(results) != len(req.Ops):
		done(fmt.Errorf("rpc: %d results for %d ops", len(results), len(req.Ops)))
		return
	case ctx.Err() != nil:
		done(fmt.Errorf("%w: %s: not sent: %w", ErrPeerUnreachable, addr, ctx.Err()))
		return
	}
	p, err := c.peer(addr, true)
	if err != nil {
		done(err)
		return
	}
	cl := &call[O, R]{req: req, results: results, then: done, deadline: c.deadline(ctx), started: c.opStart(), opDone: c.cfg.OpDone}
	p.start(cl)
}

// Send sends body, a message of kind k in its own package's encoding, to the node at
// addr on a frame of its own (never batched with ops), and waits for the answer: read
// decodes its body, and its error is the call's. An answer read leaves malformed (its
// decoder's error) drops the connection, and the call fails with ErrConnectionLost.
// What a call's error says about the outcome is as for Do.
func (c *Client[O, R]) Send(ctx context.Context, addr string, k Kind, body []byte, read func(d *wire.Decoder) error) error {
	if n := 4 + 1 + binary.MaxVarintLen64 + len(body); n > MaxFrameBytes {
		return fmt.Errorf("%w: %d bytes, over MaxFrameBytes (%d)", ErrTooLarge, n, MaxFrameBytes)
	}
	return c.call(ctx, addr, &call[O, R]{kind: k, body: body, read: read})
}

// deadline is a call's deadline: ctx's, bounded by Config.Timeout.
func (c *Client[O, R]) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(c.cfg.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// call sends cl to addr and waits for its outcome, within Config.Timeout.
func (c *Client[O, R]) call(ctx context.Context, addr string, cl *call[O, R]) error {
	p, err := c.peer(addr, true)
	if err != nil {
		return err
	}
	// The Timeout bound is a pooled timer rather than a context.WithTimeout, which costs
	// three allocations and a timer of its own per call (and a child registered with a
	// cancelable parent): fewer allocations and less CPU an op
	// (BenchmarkForward/batching=on).
	cl.deadline = c.deadline(ctx)
	cl.done = make(chan error, 1)
	t := startTimer(c.cfg.Timeout)
	defer stopTimer(t)
	return p.do(ctx, t.C, cl)
}

var timers sync.Pool

// startTimer returns a timer firing after d, from the pool when it holds one.
func startTimer(d time.Duration) *time.Timer {
	if t, _ := timers.Get().(*time.Timer); t != nil {
		t.Reset(d) // since Go 1.23 no value sent before Stop or Reset is received after
		return t
	}
	return time.NewTimer(d)
}

// stopTimer stops t and returns it to the pool.
func stopTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// peer returns addr's peer, making it when create says so (nil if there is none).
func (c *Client[O, R]) peer(addr string, create bool) (*peer[O, R], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	p := c.peers[addr]
	if p == nil && create {
		p = newPeer(addr, c.cfg, c.codec, &c.stats)
		c.peers[addr] = p
	}
	return p, nil
}

// MarkDown makes calls to addr other than heartbeats (KindHeartbeat) fail at once with
// ErrPeerUnreachable, unsent, until until (calls already queued too; calls already
// sent go on). A zero until clears the mark, and so does a later MarkDown with an
// earlier until. Heartbeats still go: they are how a peer is heard from again. A
// failed dial marks the peer down for Config.DownFor, for every call. Forget drops
// the marks with the peer.
func (c *Client[O, R]) MarkDown(addr string, until time.Time) {
	p, _ := c.peer(addr, !until.IsZero())
	if p == nil {
		return
	}
	if until.IsZero() {
		p.silentUntil.Store(0)
		return
	}
	p.silentUntil.Store(until.UnixNano())
}

// opStart is an op call's start for OpDone (zero without it: no clock read).
func (c *Client[O, R]) opStart() time.Time {
	if c.cfg.OpDone == nil {
		return time.Time{}
	}
	return time.Now()
}

// PeerLoad is what one peer's connection carries now.
type PeerLoad struct {
	Addr     string
	InFlight int // op frames sent and not yet answered
	Queued   int // calls waiting for the writer
}

// Load returns each peer's load now.
func (c *Client[O, R]) Load() []PeerLoad {
	c.mu.Lock()
	peers := make([]*peer[O, R], 0, len(c.peers))
	for _, p := range c.peers {
		peers = append(peers, p)
	}
	c.mu.Unlock()
	out := make([]PeerLoad, 0, len(peers))
	for _, p := range peers {
		l := PeerLoad{Addr: p.addr, Queued: len(p.queue)}
		p.mu.Lock()
		cn := p.conn
		p.mu.Unlock()
		if cn != nil {
			l.InFlight = cn.opFrames()
		}
		out = append(out, l)
	}
	return out
}

// Stats are counts since the client was made.
type Stats struct {
	Frames uint64 // request frames written (ops, handoffs and heartbeats)
	Ops    uint64 // ops in them
}

type stats struct{ frames, ops atomic.Uint64 }

// Stats returns how many frames and ops the client has sent.
func (c *Client[O, R]) Stats() Stats {
	return Stats{Frames: c.stats.frames.Load(), Ops: c.stats.ops.Load()}
}

// Forget releases everything the client holds for addr (a peer that left): its queued
// calls fail with ErrClosed, those in flight with ErrClosed too, and its connection,
// goroutines and mark-down go. A later call to addr starts afresh.
func (c *Client[O, R]) Forget(addr string) {
	c.mu.Lock()
	p := c.peers[addr]
	delete(c.peers, addr)
	c.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// Close closes every connection; calls in flight fail with ErrClosed.
func (c *Client[O, R]) Close() error {
	c.mu.Lock()
	c.closed = true
	peers := c.peers
	c.peers = map[string]*peer[O, R]{}
	c.mu.Unlock()
	for _, p := range peers {
		p.close()
	}
	return nil
}
