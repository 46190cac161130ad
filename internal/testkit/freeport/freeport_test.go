package freeport

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
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

func TestRefusedRefusesAndKeepsThePort(t *testing.T) {
	addr, free, err := Refused()
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	if c, err := net.DialTimeout("tcp", addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v; want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("listened on %s while Refused holds it", addr)
	}
}
