package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsCanBeBound(t *testing.T) {
	port, err := TCPAndUDP()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("TCP on %s: %v", addr, err)
	}
	ln.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("UDP on %s: %v", addr, err)
	}
	u.Close()
	if p, err := TCP(); err != nil || p <= 0 {
		t.Fatalf("TCP: %d, %v", p, err)
	}
}
