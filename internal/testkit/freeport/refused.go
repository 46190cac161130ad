package freeport

import (
	"fmt"
	"syscall"
)

// Refused returns an address on 127.0.0.1 that refuses connections, and the function
// that frees it. Its port is bound by a socket that never listens, so a dial is refused
// and no other process can take the port meanwhile: a closed listener's port may be
// taken by another test's server, whose answers then look like a peer's.
func Refused() (addr string, free func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("freeport: socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("freeport: bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, fmt.Errorf("freeport: getsockname: %w", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), func() { syscall.Close(fd) }, nil
}
