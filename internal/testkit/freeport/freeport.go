// Package freeport finds loopback ports nothing listens on, for the servers tests and
// benchmarks start. A port is free when asked; another process may take it before the
// server binds it, and callers that care retry with a new one.
package freeport

import (
	"errors"
	"net"
	"strconv"
)

// TCP returns a TCP port on 127.0.0.1 that was free a moment ago.
func TCP() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// TCPAndUDP returns a port on 127.0.0.1 free for both TCP and UDP a moment ago, as a
// gossip address needs (memberlist binds both).
func TCPAndUDP() (int, error) {
	for range 20 {
		port, err := TCP()
		if err != nil {
			return 0, err
		}
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("freeport: no port free for both TCP and UDP in 20 tries")
}
