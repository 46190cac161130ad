package respapi

import (
	"time"

	"net"
)

// streamBuf is how much a stream connection reads at once.
const streamBuf = 16 << 10

// stream serves a connection the event loops cannot poll (an in-process one, in
// tests) on a goroutine of its own, where every batch may wait for Do.
func (s *Server) stream(nc net.Conn, ss *session) {
	defer s.closedConn(ss, nc)
	buf := make([]byte, streamBuf)
	for {
		var deadline time.Time
		if s.conn.idle > 0 {
			deadline = time.Now().Add(s.conn.idle)
		}
		authBy := ss.c.authBy.Load()
		if by := time.Unix(0, authBy); authBy != 0 && (deadline.IsZero() || by.Before(deadline)) {
			deadline = by
		}
		nc.SetReadDeadline(deadline)
		n, err := nc.Read(buf)
		ss.receive(buf[:n])
		if out := ss.c.out.take(); len(out) > 0 {
			nc.SetWriteDeadline(time.Now().Add(s.conn.write))
			if _, werr := nc.Write(out); werr != nil {
				if isTimeout(werr) {
					s.metrics.dropped[dropWrite].Inc()
				}
				return
			}
		}
		if ss.closing() {
			return
		}
		if err != nil {
			if isTimeout(err) {
				reason := dropIdle
				if authBy != 0 && !time.Now().Before(time.Unix(0, authBy)) {
					reason = dropNoAuth
				}
				s.metrics.dropped[reason].Inc()
			}
			s.log.Debug("resp connection ended", "remote", ss.c.remote, "err", err)
			return
		}
	}
}
