package h2grpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// conn is one client connection: its reader goroutine (serve) owns the framer.
type conn struct {
	s      *Server
	nc     net.Conn
	fr     *http2.Framer
	hdrs   *headerList // the HEADERS frame read last, decoded (the reader's alone)
	w      *writer
	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc

	streamWindow uint32 // the receive window of each stream
	in           inflow // the connection's receive window (inflow.go)
	idle         *time.Timer
	stallTimer   *time.Timer // ticks the stall check (stall.go); set under mu
	checkDue     atomic.Bool // a tick asked the reader to check for stalled requests
	opened       int         // calls opened (the reader's; calm.go)
	earlyResets  int         // calls the client reset before their answer ended (the reader's)
	calmed       bool        // closed for flooding (the reader's)

	mu         sync.Mutex
	streams    map[uint32]*stream
	lastID     uint32 // the highest stream the client opened
	goingAway  bool
	lastActive time.Time // when the last call ended
}

// stream is one call.
type stream struct {
	id      uint32
	method  string
	auth    string
	timeout time.Duration // 0: none
	unary   UnaryHandler  // nil (and async nil): Others serves it
	async   AsyncHandler  // set: it serves the call, on the reader
	msg     []byte        // a unary call's request so far
	body    *body         // an other call's request body
	opened  time.Time     // when its headers came
	ended   atomic.Bool   // the client ended its side (set by the reader; read by the stall check too)
	inAvail atomic.Int64  // what the client may still send on it (inflow.go)

	// Guarded by conn.mu.
	running bool               // a handler runs it: it stays counted until that ends
	cancel  context.CancelFunc // an other call's context
	ctx     callCtx            // a call of ours: its handler's context
	reply   asyncReply         // an async call's answer on its way (runAsync)

	// Guarded by writer.mu.
	sendDelta int64  // the client's window for it, over its initial window
	reset     bool   // reset by the client, or the connection closed
	sentEnd   bool   // its answer ended
	held      []byte // the rest of its answer, held back by the windows (writer.blocked)
}

// stop ends the context of st's handler, if it has one; conn.mu is held.
func (st *stream) stop() {
	if st.cancel != nil {
		st.cancel()
	}
	if st.ctx.parent != nil {
		st.ctx.cancel()
	}
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, w: newWriter(nc, s.cfg.WriteTimeout), streams: map[uint32]*stream{}, lastActive: time.Now()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.fr = http2.NewFramer(nil, bufio.NewReaderSize(newMeter(readFlusher{c.w, nc}), 16<<10)) // calm.go
	// A DATA frame's payload is copied as it is read (onData): one frame serves them all.
	c.fr.SetReuseFrames()
	c.hdrs = newHeaderList(s.cfg.MaxHeaderBytes)
	c.fr.SetMaxReadFrameSize(16384) // the default we advertise by not naming it
	c.streamWindow = uint32(max(65535, s.cfg.MaxRecvMsgSize+5))
	c.in.avail = connWindow // the handshake's WINDOW_UPDATE gives it
	return c
}

// serve reads the connection's frames until it ends.
func (c *conn) serve() {
	defer c.s.forget(c)
	go c.w.loop()
	defer func() {
		c.cancel()
		c.closeStreams()
		c.w.close()
		<-c.w.done
		c.linger()
	}()
	if err := c.handshake(); err != nil {
		c.s.cfg.Logger.Debug("grpc: handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		if errors.Is(err, errNotPreface) {
			c.w.close() // and linger: what it sent after is dropped, not reset
		} else {
			c.w.abort(err)
		}
		return
	}
	c.idle = time.AfterFunc(c.s.cfg.IdleTimeout, c.checkIdle)
	defer c.idle.Stop()
	c.mu.Lock() // the timer's func reads stallTimer under mu: it may run before this returns
	c.stallTimer = time.AfterFunc(c.stallTick(), c.onStallTick)
	c.mu.Unlock()
	defer c.stallTimer.Stop()
	for {
		f, err := c.fr.ReadFrame()
		if err == nil {
			err = c.frame(f)
		}
		if err != nil && !c.readError(err) {
			return
		}
		if c.checkDue.Load() {
			c.failStalled()
		}
	}
}

// readError answers a frame's error and reports whether the connection goes on.
func (c *conn) readError(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		c.resetStream(se.StreamID, se.Code)
		return true
	case errors.As(err, &ce):
		c.s.cfg.Logger.Debug("grpc: protocol error", "remote", c.nc.RemoteAddr(), "err", err, "detail", c.fr.ErrorDetail())
		c.goAwayWith(http2.ErrCode(ce))
		return false
	case errors.Is(err, errCalm):
		c.s.cfg.Logger.Debug("grpc: closing a connection that floods", "remote", c.nc.RemoteAddr(), "err", err)
		c.calmed = true
		c.goAwayWith(http2.ErrCodeEnhanceYourCalm)
		return false
	case errors.Is(err, http2.ErrFrameTooLarge):
		// Any frame may change the connection's state (HPACK's above all), so one too
		// large to read is the connection's error (RFC 9113, 4.2).
		c.goAwayWith(http2.ErrCodeFrameSize)
		return false
	default:
		return false // read failed: the connection is gone
	}
}

// handshake reads the client's preface and first SETTINGS, and sends ours.
func (c *conn) handshake() error {
	c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.Handshake))
	if err := readPreface(c.nc); err != nil {
		return err
	}
	var settings []byte
	for _, s := range []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: c.s.cfg.MaxStreams},
		{ID: http2.SettingInitialWindowSize, Val: c.streamWindow}, {ID: http2.SettingMaxHeaderListSize, Val: c.s.cfg.MaxHeaderBytes}} {
		settings = binary.BigEndian.AppendUint16(settings, uint16(s.ID))
		settings = binary.BigEndian.AppendUint32(settings, s.Val)
	}
	c.w.control(http2.FrameSettings, 0, 0, settings)
	c.w.control(http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, connWindow-65535))
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		return errors.New("the client's first frame is not SETTINGS")
	}
	if err := c.frame(f); err != nil {
		return err
	}
	return c.nc.SetReadDeadline(time.Time{})
}

var errNotPreface = errors.New("not an HTTP/2 client preface (gRPC needs HTTP/2 with prior knowledge)")

// readPreface reads the client's preface, and fails at the first byte that is not
// the preface's: a client speaking something else is closed at once, not after the
// handshake timeout.
func readPreface(r io.Reader) error {
	buf := make([]byte, len(http2.ClientPreface))
	for got := 0; got < len(buf); {
		n, err := r.Read(buf[got:])
		if string(buf[got:got+n]) != http2.ClientPreface[got:got+n] {
			return errNotPreface
		}
		got += n
		if err != nil && got < len(buf) {
			return err
		}
	}
	return nil
}

// frame handles one frame; an error ends the connection.
func (c *conn) frame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		if err := c.hdrs.read(f, c.fr); err != nil {
			return err
		}
		return c.onHeaders(c.hdrs)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
			return err
		}
		c.forgetAll(c.w.settings(f))
		return c.w.control(http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.w.control(http2.FramePing, http2.FlagPingAck, 0, f.Data[:])
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		if c.unopened(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113, 5.1
		}
		if c.stream(f.StreamID) == nil {
			return nil // closed already
		}
		c.onReset(f.StreamID)
		return c.earlyReset()
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			c.resetStream(f.StreamID, http2.ErrCodeProtocol) // RFC 9113, 5.3.1
		}
	}
	return nil // GOAWAY (the client closes once done), other PRIORITY, unknown types
}

// unopened reports whether id is a stream the client has not opened yet (idle, in RFC 9113's words).
func (c *conn) unopened(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id > c.lastID
}

func (c *conn) stream(id uint32) *stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// onHeaders opens a call, or ends one whose client sent trailers.
func (c *conn) onHeaders(f *headerList) error {
	id := f.StreamID()
	if st := c.stream(id); st != nil {
		if !f.StreamEnded() || st.ended.Load() {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.endRequest(st)
		return nil
	}
	c.mu.Lock()
	if id%2 == 0 || id <= c.lastID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.lastID = id
	refused := c.goingAway || uint32(len(c.streams)) >= c.s.cfg.MaxStreams
	c.mu.Unlock()
	if refused {
		return c.w.control(http2.FrameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, uint32(http2.ErrCodeRefusedStream)))
	}
	if (f.HasPriority() && f.Priority().StreamDep == id) || malformed(f) {
		// RFC 9113: a stream that depends on itself (5.3.1), a malformed request (8.1.1)
		return c.w.control(http2.FrameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, uint32(http2.ErrCodeProtocol)))
	}
	st := &stream{id: id, method: f.PseudoValue("path"), opened: time.Now()}
	st.inAvail.Store(int64(c.streamWindow))
	if err := c.checkHeaders(f, st); err != nil {
		var e *headerError
		errors.As(err, &e)
		c.refuse(st, e, f.StreamEnded())
		return nil
	}
	if st.local() && c.s.cfg.Authorize != nil {
		if err := c.s.cfg.Authorize(st.method, st.auth, c.nc.RemoteAddr()); err != nil {
			s := status.Convert(err)
			c.refuse(st, &headerError{200, s.Code(), s.Message()}, f.StreamEnded())
			return nil
		}
	}
	c.mu.Lock()
	c.streams[id] = st
	c.mu.Unlock()
	c.opened++
	if !st.local() {
		c.startOther(st, f)
	}
	if f.StreamEnded() {
		c.endRequest(st)
	}
	return nil
}

// local reports whether a handler of this server serves st (else Others).
func (st *stream) local() bool { return st.unary != nil || st.async != nil }

// endRequest is the end of a call's request: a unary call is run.
func (c *conn) endRequest(st *stream) {
	st.ended.Store(true)
	if !st.local() {
		st.body.end(io.EOF)
		return
	}
	msg := st.msg
	switch {
	case len(msg) < 5:
		c.failStream(st, codes.Internal, "grpc: no request message")
		return
	case msg[0] != 0:
		c.failStream(st, codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		return
	case int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-5:
		c.failStream(st, codes.Internal, "grpc: request message length does not match the data sent")
		return
	}
	c.mu.Lock()
	st.ctx.start(c.ctx, st.timeout)
	ctx := &st.ctx
	st.running = true
	c.mu.Unlock()
	c.s.handlers.Add(1)
	c.w.pending.Add(1)
	if st.async != nil {
		c.runAsync(ctx, st)
		return
	}
	go func() { // a UnaryHandler may wait: never on the reader
		defer c.s.handlers.Done()
		c.runUnary(ctx, st)
	}()
}

// failStream answers st with code and forgets it.
func (c *conn) failStream(st *stream, code codes.Code, msg string) {
	c.refuse(st, &headerError{200, code, msg}, st.ended.Load())
	c.forget(st)
}

// onReset ends a call the client reset.
func (c *conn) onReset(id uint32) {
	st := c.stream(id)
	if st == nil {
		return
	}
	c.forgetAll(c.w.resetStream(st)) // st too, if its answer was held
	if st.body != nil {
		st.body.end(errStreamGone)
	}
	c.mu.Lock()
	running := st.running
	st.stop()
	c.mu.Unlock()
	if !running {
		c.forget(st) // else when its handler returns: it counts until then
	}
}

// onWindowUpdate grows the connection's window or a stream's. One that would pass
// 2^31-1 is FLOW_CONTROL_ERROR: of the connection, or of that stream alone.
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		ended, overflow := c.w.windowUpdate(nil, f.Increment)
		if overflow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.forgetAll(ended)
		return nil
	}
	st := c.stream(f.StreamID)
	if st == nil {
		if c.unopened(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113, 5.1
		}
		return nil
	}
	ended, overflow := c.w.windowUpdate(st, f.Increment)
	if overflow {
		c.resetStream(f.StreamID, http2.ErrCodeFlowControl)
		return nil
	}
	c.forgetAll(ended)
	return nil
}

// forgetAll forgets calls whose held answers ended (writer.finished).
func (c *conn) forgetAll(ended []*stream) {
	for _, st := range ended {
		c.forget(st)
	}
}

// resetStream resets a stream for a protocol error in it.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.onReset(id)
	c.w.control(http2.FrameRSTStream, 0, id, binary.BigEndian.AppendUint32(nil, uint32(code)))
}

// forget drops a call that has ended; a connection going away closes with its last.
func (c *conn) forget(st *stream) {
	c.mu.Lock()
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	st.stop()
	last := len(c.streams) == 0
	if last {
		c.lastActive = time.Now()
	}
	closing := last && c.goingAway
	c.mu.Unlock()
	if closing {
		c.w.close()
	}
}

// goAway tells the client to open no more calls; the connection closes after its last.
func (c *conn) goAway() { c.goAwayWith(http2.ErrCodeNo) }

func (c *conn) goAwayWith(code http2.ErrCode) {
	c.mu.Lock()
	c.goingAway = true
	last := c.lastID
	empty := len(c.streams) == 0
	c.mu.Unlock()
	p := binary.BigEndian.AppendUint32(nil, last)
	c.w.control(http2.FrameGoAway, 0, 0, binary.BigEndian.AppendUint32(p, uint32(code)))
	if empty || code != http2.ErrCodeNo {
		c.w.close()
	}
}

// shut closes the connection at once.
func (c *conn) shut(err error) {
	c.w.abort(err)
}

// closeStreams ends every call still open when the connection ends.
func (c *conn) closeStreams() {
	c.mu.Lock()
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	c.mu.Unlock()
	for _, st := range streams {
		c.w.resetStream(st)
		if st.body != nil {
			st.body.end(errStreamGone)
		}
	}
}

// checkIdle sends a connection without calls for IdleTimeout away.
func (c *conn) checkIdle() {
	c.mu.Lock()
	idleFor := time.Since(c.lastActive)
	busy := len(c.streams) > 0
	goingAway := c.goingAway // (under mu: goAway sets it from the reader)
	c.mu.Unlock()
	switch {
	case c.ctx.Err() != nil || goingAway:
	case busy:
		c.idle.Reset(c.s.cfg.IdleTimeout)
	case idleFor < c.s.cfg.IdleTimeout:
		c.idle.Reset(c.s.cfg.IdleTimeout - idleFor)
	default:
		c.goAway()
	}
}
