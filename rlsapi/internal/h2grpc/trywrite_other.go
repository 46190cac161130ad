//go:build !unix

package h2grpc

import (
	"net"
	"syscall"
)

// socketOf is nil where tryWrite cannot write without waiting: the loop writes all.
func socketOf(net.Conn) syscall.RawConn { return nil }

func tryWrite(syscall.RawConn, []byte) (int, error) { return 0, nil }
