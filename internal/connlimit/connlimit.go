// Package connlimit caps how many connections a listener keeps open at once. A
// connection beyond the cap is told why (a message of the protocol it speaks) and
// closed at once, rather than left waiting in the kernel's accept queue, where a flood
// of connections would hold every later client, good or bad, until it timed out.
package connlimit

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// rejectWrite bounds the write of the refusal: a fresh socket's send buffer takes it at
// once, so this only matters if the kernel has no room, and then the refusal is dropped.
const rejectWrite = 100 * time.Millisecond

// Listener hands out at most Max connections at a time; Accept refuses the others
// itself and goes on accepting.
type Listener struct {
	net.Listener
	max     int64
	refusal []byte // written to a refused connection before it is closed; may be empty

	open    atomic.Int64
	refused atomic.Int64
}

// New wraps ln so that at most max connections it accepted are open at once (max ≤ 0:
// no cap). A connection over the cap gets refusal (for example
// "-ERR max number of clients reached\r\n") and is closed.
func New(ln net.Listener, max int, refusal string) *Listener {
	return &Listener{Listener: ln, max: int64(max), refusal: []byte(refusal)}
}

// Accept returns the next connection within the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			l.refuse(c)
			continue
		}
		return &conn{Conn: c, l: l}, nil
	}
}

func (l *Listener) refuse(c net.Conn) {
	if len(l.refusal) > 0 {
		c.SetWriteDeadline(time.Now().Add(rejectWrite))
		c.Write(l.refusal)
	}
	c.Close()
}

// Open is how many accepted connections are open now.
func (l *Listener) Open() int64 { return l.open.Load() }

// Refused is how many connections were refused for being over the cap.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// conn gives its place back when it is first closed.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// NetConn is the connection the listener accepted, for a server that serves its file
// descriptor itself; Close must still be called on c to give its place back.
func (c *conn) NetConn() net.Conn { return c.Conn }

// SyscallConn is the accepted connection's, so that a server may write to its socket
// without waiting; errNoSyscallConn when it has none.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSyscallConn
}

var errNoSyscallConn = errors.New("connlimit: the connection has no file descriptor")

func (c *conn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
