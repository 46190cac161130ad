package respapi

import (
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/leapcount/leapcount/internal/authlimit"
)

// client is the state of one connection that commands see and change.
type client struct {
	out    replies    // replies not yet written
	remote net.Addr   // the client's address, for logs
	source netip.Addr // the client's address, as the AUTH limiter counts it
	id     int64
	authed bool
	quit   bool // QUIT was answered (or the client must go): the rest of the input is dropped
	// redirect: the connection came to ServeCluster's listener, so keys another node
	// serves are answered -MOVED.
	redirect bool
	multi    *transaction // non-nil between MULTI and EXEC or DISCARD
	// authBy is the deadline to authenticate (unix nanoseconds; 0: none, or done),
	// which the sweeper (loop.go) reads.
	authBy atomic.Int64
	// mayWait: this connection's commands run where they may wait (on a goroutine of
	// their own), so a batch is decided with counter.Do; when false (on an event loop),
	// a batch not decided at once parks the session (see session.serve).
	mayWait bool
	batch   batch
	loop    *loopConn // the event loop's connection (nil: on a goroutine of its own)
}

// session is one connection's input as it arrives, whichever way it arrives: it
// frames the bytes, serves the whole commands among them through the client's
// commands and leaves their replies in client.out.
type session struct {
	s    *Server
	c    client
	in   framer
	args [][]byte

	loop *loopConn // on an event loop (loop.go); nil: on a goroutine of its own (stream.go)
}

func newSession(s *Server, remote net.Addr, redirect, mayWait bool) *session {
	ss := &session{s: s, in: framer{guard: guard{maxBulk: s.conn.max}, max: s.conn.max}}
	ss.c = client{remote: remote, source: authlimit.Source(remote), id: s.nextID.Add(1),
		authed: s.cfg.Token == "", redirect: redirect && s.cfg.Cluster != nil, mayWait: mayWait}
	return ss
}

// receive takes p, the next bytes from the client (valid only during the call), and
// serves the whole commands received so far. It reports false when the session is
// parked: a batch must wait, and serveParked, on a goroutine, must go on before
// anything more is received.
func (ss *session) receive(p []byte) bool {
	in := ss.in.add(p)
	n, ok := ss.serve(in[:ss.in.whole])
	ss.in.served(in, n, ss.c.quit)
	if ok && ss.in.err == errTooLarge {
		ss.tellError()
	}
	return ok
}

// serveParked goes on where receive parked: it decides the waiting batch and serves
// the rest of the whole commands held, waiting wherever it must. It runs on a goroutine
// of its own while nothing else touches the session.
func (ss *session) serveParked() {
	ss.c.mayWait = true
	ss.s.decide(&ss.c)
	in := ss.in.held
	n, _ := ss.serve(in[:ss.in.whole])
	ss.in.served(in, n, ss.c.quit)
	ss.c.mayWait = false
}

// decided goes on, on the loop, where receive parked once the batch it left has been
// decided (loopConn.startBatch): it answers the batch and serves the rest of the whole
// commands held, as receive would. It reports false when the session parks again.
func (ss *session) decided() bool {
	ss.s.answer(&ss.c)
	in := ss.in.held
	n, ok := ss.serve(in[:ss.in.whole])
	ss.in.served(in, n, ss.c.quit)
	return ok
}

// serve runs the whole commands in b and returns how many bytes it took. It stops
// early, reporting false, where a command (or the end of b) would have to wait for a
// batch this session cannot decide without waiting (see client.mayWait). At the end
// of b the batch is decided, and a broken framing told.
func (ss *session) serve(b []byte) (int, bool) {
	off := 0
	for off < len(b) && !ss.c.quit {
		args, n, err := nextCommand(b[off:], ss.args[:0])
		ss.args = args[:0]
		if err != nil {
			ss.in.err = err
			off = len(b)
			break
		}
		if len(args) > 0 && !ss.s.execute(&ss.c, args) {
			clear(args)
			return off, false
		}
		clear(args) // let go of the input until the next command
		off += n
	}
	if !ss.s.decide(&ss.c) {
		return off, false
	}
	if off == len(b) && ss.in.err != nil {
		ss.tellError()
	}
	return off, true
}

// tellError answers a broken framing ("-ERR Protocol error: ...") and ends the
// connection once the replies before it are written.
func (ss *session) tellError() {
	if !ss.c.quit {
		ss.c.out.WriteError("ERR " + ss.in.err.Error())
		ss.c.quit = true
		ss.s.metrics.dropped[dropProtocol].Inc()
	}
}

// closing reports whether the connection is to be closed once its replies are written.
func (ss *session) closing() bool { return ss.c.quit }

// framer keeps what a client sent and has not been served: it runs the guard over the
// bytes as they come, so it knows where the whole commands end.
type framer struct {
	guard guard
	max   int64  // the most bytes kept (Config.MaxUnanswered)
	held  []byte // received and not yet served: whole commands, then part of one
	whole int    // held[:whole], or add's in[:whole], is whole commands
	err   error  // the framing broke (or max was passed) after the whole commands
}

// add takes the next bytes, p, and returns everything not served yet, whole commands
// (in[:whole]) first. in is p itself when nothing was held (no copy).
func (f *framer) add(p []byte) []byte {
	in := p
	if len(f.held) > 0 {
		f.held = append(f.held, p...)
		in = f.held
	}
	if f.err == nil && len(p) > 0 {
		end, err := f.guard.scan(p)
		if end >= 0 {
			f.whole = len(in) - len(p) + end
		}
		f.err = err
	}
	return in
}

// served drops in[:n], which was served, and keeps the rest for later, unless the
// connection is ending. More than max kept (a command too large, or a pipeline sent on
// and on while a batch waits) is errTooLarge.
func (f *framer) served(in []byte, n int, ending bool) {
	f.whole -= n
	switch {
	case ending:
		f.held, f.whole = f.held[:0], 0
	case len(f.held) > 0:
		f.held = append(f.held[:0], f.held[n:]...)
	case n < len(in):
		f.held = append(f.held, in[n:]...)
	}
	if int64(len(f.held)) > f.max && f.err == nil {
		f.err = errTooLarge
	}
}
