// Package frametest sends raw frames to a node-to-node (rpc) server in tests, to see
// what the server does with bytes no client of ours would send.
package frametest

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// Answered sends one frame, body prefixed with its length, on a new connection to addr
// and reports whether the server answered it (rather than hanging up). A server that
// does neither within 5s fails the test.
func Answered(t testing.TB, addr string, body []byte) bool {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	nc.Write(append(frame, body...))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server neither answered nor hung up")
	}
	return err == nil
}
