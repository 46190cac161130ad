package respapi

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxUnanswered = 1 << 20
	DefaultWriteTimeout  = 30 * time.Second
	DefaultAuthTimeout   = 10 * time.Second
)

// holdMax is the most of one unfinished multibulk command of more than fewArgs
// arguments that capConn holds back from redcon (see guard): a longer one goes over in
// parts of holdMax bytes or more, so redcon parses it once per part (a parse costs
// O(arguments): redcon skips bulk data), not once per read. An inline line is held
// whole (the guard's maxInline bounds it).
const holdMax = 64 << 10

// Held bytes live in a small buffer of the connection's own, or, when they need more
// room, in a big one from bigBufs, given back once it is empty. A big buffer has room
// for holdMax bytes or a whole inline line, and as much again to read into.
const (
	smallHeld = 4 << 10
	bigHeld   = 2 * max(holdMax, maxInline+1)
)

var bigBufs = sync.Pool{New: func() any { b := make([]byte, bigHeld); return &b }}

var errTooLarge = &protocolError{"request too large"}

// Why the server drops a connection that times out, as the metrics name it.
const (
	dropIdle   = "idle"            // nothing read for IdleTimeout
	dropNoAuth = "unauthenticated" // no AUTH within AuthTimeout
	dropWrite  = "write_timeout"   // a reply not taken by the client within WriteTimeout
)

// dropError is a timeout that ended a connection, with its reason.
type dropError struct {
	reason string
	err    error
}

func (e *dropError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *dropError) Unwrap() error { return e.err }

// connConfig is what every connection of a capListener gets.
type connConfig struct {
	max   int64         // bytes a client may send without a reply
	idle  time.Duration // 0: no idle timeout
	write time.Duration // bound of each write
	auth  time.Duration // time to authenticate in; 0: no token, no deadline
}

// capListener hands out capConns. redcon buffers a command whole, whatever its size,
// and trusts the framing it is sent; this is where the size and the framing are
// checked, and the timeouts kept.
type capListener struct {
	net.Listener
	cfg connConfig
}

func (l capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &capConn{Conn: c, cfg: l.cfg, guard: guard{maxBulk: l.cfg.max}}
	if l.cfg.auth > 0 {
		cc.authBy = time.Now().Add(l.cfg.auth)
	}
	return cc, nil
}

// capConn is the connection redcon reads from. It counts the bytes read since the last
// write, runs the guard over them, holds back what redcon would parse again and again
// (see guard and holdMax), and sets the read and write deadlines. Read and Write are
// called by the connection's one goroutine in redcon; so is authenticated, from a
// command's handler.
type capConn struct {
	net.Conn
	cfg        connConfig
	unanswered atomic.Int64 // bytes read since the last reply

	guard guard
	// held has bytes read from the socket that redcon has not had yet: held[r:ready]
	// may be handed over; held[ready:w], part of a command not yet whole, is held back.
	held        []byte
	big         *[]byte // held's buffer when it is from bigBufs
	r, ready, w int
	err         error     // ends the reading, once held[r:ready] is handed over
	told        bool      // the client was sent its protocol error
	authBy      time.Time // deadline to authenticate; zero: none (no token, or done)
}

func (c *capConn) Read(p []byte) (int, error) {
	for {
		if c.r < c.ready {
			n := copy(p, c.held[c.r:c.ready])
			c.r += n
			return n, nil
		}
		if c.err != nil {
			return 0, c.stop()
		}
		if c.r == c.w {
			// Nothing held: read straight into p and keep only an incomplete tail.
			c.r, c.ready, c.w = 0, 0, 0
			if c.big != nil {
				bigBufs.Put(c.big)
				c.held, c.big = nil, nil
			}
			n := c.readSocket(p)
			k := c.check(p[:n], 0)
			c.hold(p[k:n])
			if k > 0 {
				return k, nil
			}
			continue
		}
		// Part of a command is held: read more after it.
		if c.w == len(c.held) {
			c.hold(nil)
		}
		n := c.readSocket(c.held[c.w:])
		c.ready = c.r + c.check(c.held[c.w:c.w+n], c.w-c.r)
		c.w += n
	}
}

// hold moves what is held to the front of held and appends b, with at least as much
// room again to read into.
func (c *capConn) hold(b []byte) {
	n := c.w - c.r
	switch need := n + len(b); {
	case need == 0:
	case 2*need > len(c.held):
		// A big buffer is always enough: what is held is below holdMax, or an inline
		// line of at most maxInline.
		buf := make([]byte, smallHeld)
		if 2*need > smallHeld {
			c.big = bigBufs.Get().(*[]byte)
			buf = *c.big
		}
		copy(buf, c.held[c.r:c.w])
		c.held = buf
	default:
		copy(c.held, c.held[c.r:c.w])
	}
	c.r, c.ready, c.w = 0, 0, n+copy(c.held[n:], b)
}

// readSocket reads once from the client into p, within the deadlines, and counts what
// it read; a failure (or the byte cap) is kept in c.err.
func (c *capConn) readSocket(p []byte) int {
	if c.unanswered.Load() > c.cfg.max {
		c.err = errTooLarge
		return 0
	}
	var deadline time.Time
	if c.cfg.idle > 0 {
		deadline = time.Now().Add(c.cfg.idle)
	}
	if !c.authBy.IsZero() && (deadline.IsZero() || c.authBy.Before(deadline)) {
		deadline = c.authBy
	}
	c.Conn.SetReadDeadline(deadline)
	n, err := c.Conn.Read(p)
	c.unanswered.Add(int64(n))
	if err != nil {
		c.err = err
		if isTimeout(err) {
			reason := dropIdle
			if !c.authBy.IsZero() && !time.Now().Before(c.authBy) {
				reason = dropNoAuth
			}
			c.err = &dropError{reason, err}
		}
	}
	return n
}

// check runs the guard over chunk, which follows held bytes of the same unfinished
// command, and returns how many bytes of held+chunk may go to redcon.
func (c *capConn) check(chunk []byte, held int) int {
	end, err := c.guard.scan(chunk)
	rel := 0
	if end >= 0 {
		rel = held + end
	}
	if err != nil {
		c.err = err // what follows the last whole command is never handed over
		return rel
	}
	total := held + len(chunk)
	if c.guard.inShortMultibulk() || c.guard.inMultibulk() && total-rel >= holdMax {
		rel = total
	}
	return rel
}

// stop ends the reading: a client that broke the framing or the byte cap is told why
// (once), and the error goes to redcon, which closes the connection.
func (c *capConn) stop() error {
	var pe *protocolError
	if !c.told && errors.As(c.err, &pe) {
		c.told = true
		c.Write([]byte("-ERR " + pe.Error() + "\r\n"))
	}
	return c.err
}

func (c *capConn) Write(p []byte) (int, error) {
	c.unanswered.Store(0)
	c.Conn.SetWriteDeadline(time.Now().Add(c.cfg.write))
	n, err := c.Conn.Write(p)
	if err != nil && isTimeout(err) {
		err = &dropError{dropWrite, err}
	}
	return n, err
}

// authenticated lifts the deadline to authenticate.
func (c *capConn) authenticated() { c.authBy = time.Time{} }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
