package h2grpc

import (
	"io"
	"net"
	"time"
)

// A connection ends without a reset. Closing a socket with bytes of the client's still
// unread makes the kernel reset it, and a reset may make the client drop what it had
// not read yet: the GOAWAY that says why (RFC 9113, 5.4.1: "after sending the GOAWAY
// frame for an error condition, the endpoint MUST close the TCP connection"; h2spec
// checks that it is a close). So the writer, once all is written, shuts its side only,
// and the reader reads what the client sends meanwhile before it closes the socket.

// lingerTime bounds how long a connection that ended is read, and maxLinger how much.
const (
	lingerTime = time.Second
	maxLinger  = 1 << 20
	// maxCalmLinger is maxLinger for a connection closed for flooding (calm.go).
	maxCalmLinger = 64 << 10
)

// linger, on the reader once the writer has ended, drains what the client sent and
// closes the connection. (Nothing is drained after writer.abort, which closed it.)
func (c *conn) linger() {
	deadline := time.Now().Add(lingerTime)
	c.nc.SetReadDeadline(deadline)
	n := int64(maxLinger)
	if c.calmed {
		n = maxCalmLinger // a flood is not drained, only what was in flight
	}
	if read, _ := io.CopyN(io.Discard, c.nc, n); read == n {
		// The client sends on. Closed now, with its bytes unread, the connection would
		// be reset, and the kernel would drop what it had not sent the client yet, the
		// GOAWAY among it; left unread until the deadline, it costs nothing, and a
		// client that reads has had everything and the end by then.
		time.Sleep(time.Until(deadline))
	}
	c.nc.Close()
}

// closeWrite shuts the sending side of nc: a TCP FIN, or TLS's close_notify; it looks
// through wrappers that name the connection they wrap (tls.Conn, connlimit's).
func closeWrite(nc net.Conn) {
	for {
		switch c := nc.(type) {
		case interface{ CloseWrite() error }:
			c.CloseWrite()
			return
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return
		}
	}
}
