//go:build unix

package h2grpc

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// socketOf is nc's socket, when nc writes its bytes to it as they are (not TLS).
func socketOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// tryWrite writes what the socket takes of b without waiting for it and reports how
// much that was. A socket that takes nothing now, or whose write deadline has passed,
// is not an error: the writer's loop writes the rest, with a deadline of its own.
func tryWrite(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true // one attempt: never wait for the socket
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, err
	case werr == syscall.EAGAIN || werr == syscall.EINTR:
		return 0, nil
	case werr != nil:
		return 0, werr
	}
	return n, nil
}
