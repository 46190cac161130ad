package respapi

import (
	"errors"
	"net"
	"sync/atomic"
)

// DefaultMaxUnanswered is Config.MaxUnanswered when it is 0.
const DefaultMaxUnanswered = 1 << 20

var errTooLarge = errors.New("respapi: request too large")

// capListener hands out connections that count the bytes read since the last write.
// redcon buffers a command whole, whatever its size; this is where a size is enforced.
type capListener struct {
	net.Listener
	max int64
}

func (l capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	max := l.max
	if max == 0 {
		max = DefaultMaxUnanswered
	}
	return &capConn{Conn: c, max: max}, nil
}

type capConn struct {
	net.Conn
	max        int64
	unanswered atomic.Int64 // bytes read since the last reply
}

func (c *capConn) Read(p []byte) (int, error) {
	if c.unanswered.Load() > c.max {
		c.Conn.Write([]byte("-ERR Protocol error: request too large\r\n"))
		return 0, errTooLarge
	}
	n, err := c.Conn.Read(p)
	c.unanswered.Add(int64(n))
	return n, err
}

func (c *capConn) Write(p []byte) (int, error) {
	c.unanswered.Store(0)
	return c.Conn.Write(p)
}
