package netsim

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// stream is a connection: two pipes, ab from the dialling end to the accepting one.
type stream struct {
	ab, ba *pipe
	open   atomic.Int32 // ends not closed yet; at 0 the network forgets the stream
}

func (s *stream) reset() {
	s.ab.reset()
	s.ba.reset()
}

// conn is one end of a stream.
type conn struct {
	n             *Network
	s             *stream
	in, out       *pipe
	local, remote Addr
	closeOnce     sync.Once
}

var _ net.Conn = (*conn)(nil)

// newStreamLocked makes a stream from local (the dialler) to remote with the links'
// current faults, registers it, and returns its two ends.
func (n *Network) newStreamLocked(local, remote Addr) (dialer, acceptor *conn) {
	up, down := link{local.Host, remote.Host}, link{remote.Host, local.Host}
	s := &stream{
		ab: newPipe(up, n.blockedLocked(up), n.delays[up]),
		ba: newPipe(down, n.blockedLocked(down), n.delays[down]),
	}
	s.open.Store(2)
	n.streams[s] = struct{}{}
	dialer = &conn{n: n, s: s, in: s.ba, out: s.ab, local: local, remote: remote}
	acceptor = &conn{n: n, s: s, in: s.ab, out: s.ba, local: remote, remote: local}
	return dialer, acceptor
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.in.read(b)
	return n, c.wrap("read", err)
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.out.write(b)
	return n, c.wrap("write", err)
}

// Close sends the end of stream to the peer (after the bytes written before it, and
// subject to the same faults) and fails this end's pending and later calls with
// net.ErrClosed. The peer's writes then fail with EPIPE, at once even across a blocked
// link: a simplification (a real peer would learn it from a reset that crossed it).
func (c *conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.out.closeWrite()
		c.in.closeRead()
		if c.s.open.Add(-1) == 0 {
			c.n.forget(c.s)
		}
	})
	if !first {
		return c.wrap("close", net.ErrClosed)
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.in.setReadDeadline(t)
	c.out.setWriteDeadline(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.in.setReadDeadline(t)
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.out.setWriteDeadline(t)
	return nil
}

// wrap makes err look like the net package's: a *net.OpError, except io.EOF.
func (c *conn) wrap(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: "netsim", Source: c.local, Addr: c.remote, Err: err}
}
