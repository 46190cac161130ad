package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// Handler decides a batch that arrived from a peer, filling results[i] for req.Ops[i].
// For a forwarded request it answers ErrNotOwner for ops it does not own.
type Handler[O, R any] interface {
	Handle(ctx context.Context, req *Request[O], results []R)
}

// AsyncHandler is a Handler that decides without its caller waiting: HandleAsync
// decides req as Handle would and calls done once, from any goroutine (possibly before
// it returns); req and results are the handler's until then. A server whose handler is
// one decides every op frame from the connection's reader, which goes on reading
// meanwhile: a frame that waits (for a lease, a load) holds up no other, nor the
// heartbeats on its connection.
type AsyncHandler[O, R any] interface {
	Handler[O, R]
	HandleAsync(ctx context.Context, req *Request[O], results []R, done func())
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc[O, R any] func(ctx context.Context, req *Request[O], results []R)

// Handle calls f.
func (f HandlerFunc[O, R]) Handle(ctx context.Context, req *Request[O], results []R) {
	f(ctx, req, results)
}

// writeTimeout bounds one response write, so a peer that stops reading cannot hold a
// server goroutine forever.
const writeTimeout = 5 * time.Second

// Server answers peers' requests on the --rpc address: ops, decided by its Handler,
// and messages, by their kinds' MessageHandlers.
type Server[O, R any] struct {
	h        Handler[O, R]
	async    AsyncHandler[O, R] // h, when it is one
	codec    Codec[O, R]
	messages [256]*MessageHandler
	inline   func() bool
	shake    func(net.Conn) (net.Conn, error)
	logger   *slog.Logger
	stall    time.Duration    // frameStall; shorter in tests
	writeTO  time.Duration    // writeTimeout; longer in tests
	now      func() time.Time // time.Now; tests skew it to play a node whose wall clock is off

	lastFrame atomic.Int64 // unix ns of the last frame read, other than InReader messages
	refused   atomic.Int64 // connections whose handshake failed
	warned    atomic.Int64 // unix ns of the last warning about one

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server that decides ops with h, decoded and answered with codec.
func NewServer[O, R any](h Handler[O, R], codec Codec[O, R], logger *slog.Logger) *Server[O, R] {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server[O, R]{h: h, codec: codec, logger: logger, stall: frameStall, writeTO: writeTimeout, now: time.Now, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	s.async, _ = h.(AsyncHandler[O, R])
	s.lastFrame.Store(time.Now().UnixNano())
	return s
}

// Serve accepts connections on ln until Close. It returns ErrClosed after Close.
func (s *Server[O, R]) Serve(ln net.Listener) error {
	if !s.track(ln, nil) {
		ln.Close()
		return ErrClosed
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if !s.track(nil, c) {
			c.Close()
			return ErrClosed
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

func (s *Server[O, R]) track(ln net.Listener, c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if ln != nil {
		s.lns[ln] = struct{}{}
	}
	if c != nil {
		s.conns[c] = struct{}{}
	}
	return true
}

func (s *Server[O, R]) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// SetInline, before Serve, tells the server when op frames may be decided in the
// connection's reader goroutine, in order: when none of them can wait for long. Without
// it every frame is decided in its own goroutine.
func (s *Server[O, R]) SetInline(f func() bool) { s.inline = f }

// SetHandshake, before Serve, makes every connection begin with handshake (peer
// authentication, see package peerauth): no frame is read from a connection before it
// succeeds, and one it fails is closed. It runs in the connection's own goroutine, so a
// slow one holds up no other connection; it must bound its own time.
func (s *Server[O, R]) SetHandshake(handshake func(net.Conn) (net.Conn, error)) { s.shake = handshake }

// Refused counts connections closed because their handshake failed.
func (s *Server[O, R]) Refused() int64 { return s.refused.Load() }

// IdleFor reports how long ago the last op frame or message other than an InReader
// one (a heartbeat) arrived (since start if none did).
func (s *Server[O, R]) IdleFor() time.Duration {
	return time.Since(time.Unix(0, s.lastFrame.Load()))
}

// Close stops accepting, closes every connection and waits for their goroutines.
func (s *Server[O, R]) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// maxInflight bounds the frames one connection may have being decided at once.
const maxInflight = 256

// serveConn reads one connection's frames and decides them. Heartbeats, and op frames
// while Inline says so (no op can wait for long), are decided right here, in order,
// and their answers flushed once no more input is buffered: no goroutine to start or
// wake per frame. Otherwise, and always for Handoff frames, each frame is decided in
// its own goroutine, so that a frame that waits (for a handoff) holds up no other: in
// particular not the Handoff frame that would end its wait. Frames on one connection
// come from callers who do not wait for each other, so they need no order among them.
func (s *Server[O, R]) serveConn(raw net.Conn) {
	defer s.wg.Done()
	var handlers sync.WaitGroup
	defer func() {
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
		raw.Close()
		handlers.Wait()
	}()
	c := s.handshake(raw)
	if c == nil {
		return
	}
	w := newResponder(c, s.writeTO)
	stop := make(chan struct{})
	handlers.Add(1)
	go func() { defer handlers.Done(); w.flush(stop) }()
	defer close(stop) // before handlers.Wait, deferred earlier
	fr := newFrameReader(c, s.stall)
	slots := make(chan struct{}, maxInflight)
	ctx := context.Background()
	// Frames answered here, in turn, reuse one frame buffer and one scratch for their
	// results and answer, which saves allocations and CPU an op
	// (BenchmarkForward/batching=off,inline); a frame handed to a goroutine takes its
	// buffer along.
	var buf []byte
	sc := &scratch[R]{}
	for {
		frame, err := fr.next(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.logger.Debug("rpc connection dropped", "peer", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		read := s.now() // an op frame's budget counts from here
		mh, err := s.messageHandler(frame)
		if err != nil {
			s.logger.Warn("rpc: dropping connection after a malformed frame", "peer", c.RemoteAddr().String(), "err", err)
			return
		}
		if mh == nil || !mh.InReader {
			s.lastFrame.Store(time.Now().UnixNano())
		}
		if s.async != nil && mh == nil {
			if !s.start(ctx, w, frame, read, fr.br.Buffered() == 0, &sc, slots, &handlers) {
				return
			}
			buf = nil
			continue
		}
		if mh != nil && mh.InReader || mh == nil && s.inline != nil && s.inline() {
			if !s.answerTo(ctx, w, frame, read, fr.br.Buffered() == 0, sc) {
				return
			}
			if buf = frame; cap(buf) > 1<<20 { // decoding copied out what it keeps
				buf = nil // but keep no megabytes per connection
			}
			continue
		}
		buf = nil
		slots <- struct{}{}
		handlers.Add(1)
		go func() {
			defer func() { <-slots; handlers.Done() }()
			s.answerTo(ctx, w, frame, read, true, nil)
		}()
	}
}

// messageHandler returns the handler of frame's kind of message, nil for an ops frame,
// or an error for a frame no handler takes, or too large for its kind.
func (s *Server[O, R]) messageHandler(frame []byte) (*MessageHandler, error) {
	if frame[0] == frameRequest {
		return nil, nil
	}
	mh := s.messages[frame[0]]
	switch {
	case mh == nil:
		return nil, fmt.Errorf("%w: frame type %d", ErrBadFrame, frame[0])
	case len(frame)+4 > mh.MaxBytes:
		return nil, fmt.Errorf("%w: message of kind %d of %d bytes, over its bound (%d)", ErrBadFrame, frame[0], len(frame)+4, mh.MaxBytes)
	}
	return mh, nil
}

// start decides an ops frame with st without waiting for it: answered at once (the
// common case) it is written like a frame decided in the reader, with sc's memory;
// otherwise it takes one of the connection's slots, and its answer is written when it
// comes, with memory of its own (sc is replaced: the frame keeps the one it was
// given). With no slot free, the frame is answered expired: certainly not decided, and
// sent again by its sender. It reports false when the connection must be dropped.
func (s *Server[O, R]) start(ctx context.Context, w *responder, frame []byte, read time.Time, flush bool,
	scp **scratch[R], slots chan struct{}, handlers *sync.WaitGroup) bool {
	sc := *scp
	var req Request[O]
	id, err := s.decodeRequestFrame(&sc.dec, frame, &req)
	if err != nil {
		s.logger.Warn("rpc: dropping connection after a malformed frame", "peer", w.c.RemoteAddr().String(), "err", err)
		w.c.Close()
		return false
	}
	sc.results = resize(sc.results, len(req.Ops))
	left := s.timeLeft(read, &req)
	if left <= 0 {
		s.expired(sc.results)
		return s.reply(w, id, sc, flush)
	}
	select {
	case slots <- struct{}{}:
	default:
		s.expired(sc.results) // too many frames waiting here: the sender tries again
		return s.reply(w, id, sc, flush)
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	handlers.Add(1)
	var mu sync.Mutex
	inReader := true // done, if called before Start returns, leaves the answer to the reader
	answered := false
	s.async.HandleAsync(ctx, &req, sc.results, func() {
		mu.Lock()
		answered = true
		later := !inReader
		mu.Unlock()
		if later {
			cancel()
			w.queue(s.appendResponse(nil, id, sc.results))
			<-slots
			handlers.Done()
		}
	})
	mu.Lock()
	inReader = false
	now := answered
	mu.Unlock()
	if !now {
		*scp = &scratch[R]{} // the frame waiting keeps sc
		return true
	}
	cancel()
	<-slots
	handlers.Done()
	return s.reply(w, id, sc, flush)
}

// reply writes the answer to frame id from sc's results.
func (s *Server[O, R]) reply(w *responder, id uint64, sc *scratch[R], flush bool) bool {
	sc.out = s.appendResponse(sc.out[:0], id, sc.results)
	err := w.send(sc.out, flush)
	if cap(sc.out) > 1<<20 {
		sc.out = nil // do not keep megabytes per connection
	}
	clear(sc.results) // no error values kept alive
	if err != nil {
		w.c.Close()
		return false
	}
	return true
}

// handshake runs the handshake, if one is set, and returns the connection to serve, or
// nil if the peer was refused. Refusals are counted, and warned of at most once a
// minute: a flood of outsiders must not flood the log.
func (s *Server[O, R]) handshake(c net.Conn) net.Conn {
	if s.shake == nil {
		return c
	}
	sc, err := s.shake(c)
	if err == nil {
		return sc
	}
	s.refused.Add(1)
	now := time.Now().UnixNano()
	if last := s.warned.Load(); now-last > int64(time.Minute) && s.warned.CompareAndSwap(last, now) {
		s.logger.Warn("rpc: refused a connection (more are only counted, for a minute)", "peer", c.RemoteAddr().String(), "err", err)
	} else {
		s.logger.Debug("rpc: refused a connection", "peer", c.RemoteAddr().String(), "err", err)
	}
	return nil
}

// scratch is memory one connection's reader reuses for the frames it answers itself.
type scratch[R any] struct {
	dec     wire.Decoder // a decoder made per frame escapes through the codec's methods
	results []R
	out     []byte
}

// answerTo decides frame, read at read, and writes its answer, flushing when told to,
// with sc's memory when not nil. It reports false when the connection must be dropped.
func (s *Server[O, R]) answerTo(ctx context.Context, w *responder, frame []byte, read time.Time, flush bool, sc *scratch[R]) bool {
	out, err := s.answer(ctx, frame, read, sc)
	if err != nil {
		s.logger.Warn("rpc: dropping connection after a malformed frame", "peer", w.c.RemoteAddr().String(), "err", err)
		w.c.Close()
		return false
	}
	if w.send(out, flush) != nil {
		w.c.Close()
		return false
	}
	return true
}

// answer decides one frame, read at read, and returns the response frame (in sc's
// memory, when not nil: valid until the next call with it).
func (s *Server[O, R]) answer(ctx context.Context, frame []byte, read time.Time, sc *scratch[R]) ([]byte, error) {
	if frame[0] != frameRequest {
		return s.answerMessage(ctx, frame)
	}
	var req Request[O]
	d := new(wire.Decoder)
	if sc != nil {
		d = &sc.dec
	}
	id, err := s.decodeRequestFrame(d, frame, &req)
	if err != nil {
		return nil, err
	}
	if sc == nil {
		results := make([]R, len(req.Ops))
		s.handle(ctx, read, &req, results)
		return s.appendResponse(nil, id, results), nil
	}
	sc.results = resize(sc.results, len(req.Ops))
	s.handle(ctx, read, &req, sc.results)
	sc.out = s.appendResponse(sc.out[:0], id, sc.results)
	if cap(sc.out) > 1<<20 {
		defer func() { sc.out = nil }() // do not keep megabytes per connection
	}
	clear(sc.results) // no error values kept alive
	return sc.out, nil
}
