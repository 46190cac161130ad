package respapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// DefaultTLSHandshakeTimeout is Config.TLSHandshakeTimeout when it is zero: a
// connection that has not finished its handshake by then is closed, so a client that
// never does holds its slot no longer.
const DefaultTLSHandshakeTimeout = 10 * time.Second

// notTLS is the reply to a client that speaks plaintext to a TLS port: written in
// clear, so redis-cli without --tls shows why instead of a bare disconnect.
const notTLS = "-ERR Protocol error: this port speaks TLS; connect with TLS (redis-cli --tls)\r\n"

// streamTLS runs the handshake on nc, then serves the connection as stream does. The
// handshake runs here, on the connection's goroutine, never on the accept loop, which
// a slow handshake would stall for every client.
func (s *Server) streamTLS(nc net.Conn, conf *tls.Config, ss *session) {
	tc := tls.Server(nc, conf)
	if err := s.handshake(tc); err != nil {
		s.refuseHandshake(nc, err)
		s.closedConn(ss, tc)
		return
	}
	s.stream(tc, ss)
}

// handshake runs tc's handshake within Config.TLSHandshakeTimeout (or Close, which
// cancels s.ctx).
func (s *Server) handshake(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(s.ctx, cmp.Or(s.cfg.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout))
	defer cancel()
	return tc.HandshakeContext(ctx)
}

// refuseHandshake counts a failed handshake, logs why at debug level (a client that
// cannot say hello is no event of the server's), and tells a plaintext client that the
// port speaks TLS.
func (s *Server) refuseHandshake(nc net.Conn, err error) {
	s.metrics.dropped[dropTLS].Inc()
	s.log.Debug("resp TLS handshake failed", "remote", nc.RemoteAddr(), "err", err)
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) && rhe.Conn != nil {
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte(notTLS))
	}
}
