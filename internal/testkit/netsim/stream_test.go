package netsim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestStreamRoundTrip(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:7000")
	write(t, client, "ping")
	readString(t, server, "ping")
	write(t, server, "pong")
	readString(t, client, "pong")

	if got := client.RemoteAddr().String(); got != "b:7000" {
		t.Errorf("client remote %s; want b:7000", got)
	}
	if got := server.LocalAddr().String(); got != "b:7000" {
		t.Errorf("server local %s; want b:7000", got)
	}
	if got := client.LocalAddr().(Addr); got.Host != "a" || got.Port == 0 {
		t.Errorf("client local %v; want host a and a port", got)
	}
	if got, want := server.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Errorf("server remote %s; want %s", got, want)
	}
}

func TestListenAddresses(t *testing.T) {
	noLeaks(t)
	n := New()
	l1, l2 := listen(t, n, "a:0"), listen(t, n, "a:0")
	p1, p2 := l1.Addr().(Addr).Port, l2.Addr().(Addr).Port
	if p1 == 0 || p2 == 0 || p1 == p2 {
		t.Fatalf("got ports %d and %d; want two different free ports", p1, p2)
	}
	if _, err := n.Listen(l1.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on a taken address: got %v; want EADDRINUSE", err)
	}
	l1.Close()
	listen(t, n, l1.Addr().String()) // free again
	// One host, two spellings.
	listen(t, n, "[::1]:80")
	if _, err := n.Listen("[0::1]:80"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on [0::1]:80 after [::1]:80: got %v; want EADDRINUSE", err)
	}
	for _, bad := range []string{"a", ":80", "a:x", "a:70000", ""} {
		if _, err := n.Listen(bad); !errors.Is(err, ErrBadAddr) {
			t.Errorf("listen %q: got %v; want ErrBadAddr", bad, err)
		}
		if _, err := n.Dialer("a")(context.Background(), bad); !errors.Is(err, ErrBadAddr) {
			t.Errorf("dial %q: got %v; want ErrBadAddr", bad, err)
		}
	}
}

func TestDialRefusedAtOnce(t *testing.T) {
	noLeaks(t)
	n := New()
	ln := listen(t, n, "b:1")
	ln.Close()
	for _, addr := range []string{"b:1", "c:2", "b:0"} {
		// No deadline: a refusal must not wait for one.
		if _, err := n.Dialer("a")(context.Background(), addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s: got %v; want ECONNREFUSED", addr, err)
		}
	}
}

func TestWritesAreBuffered(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	data := bytes.Repeat([]byte("0123456789abcdef"), StreamBuffer/16+100) // over the buffer
	client.SetWriteDeadline(time.Now().Add(long))
	if k, err := client.Write(data[:1<<20]); k != 1<<20 || err != nil {
		t.Fatalf("write 1MiB nobody reads: got %d, %v; want %d, nil", k, err, 1<<20)
	}
	// The rest does not fit: the write blocks until its deadline, having queued what fit.
	client.SetWriteDeadline(time.Now().Add(quiet))
	k, err := client.Write(data[1<<20:])
	if want := StreamBuffer - 1<<20; k != want || !isTimeout(err) {
		t.Fatalf("write past the buffer: got %d, %v; want %d, a timeout", k, err, want)
	}
	// A reader draining the buffer lets a blocked write finish.
	done := make(chan error, 1)
	go func() {
		client.SetWriteDeadline(time.Now().Add(long))
		_, err := client.Write(data[StreamBuffer:])
		done <- err
	}()
	got := make([]byte, len(data))
	server.SetReadDeadline(time.Now().Add(long))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read bytes differ from those written")
	}
	if err := <-done; err != nil {
		t.Fatalf("blocked write: %v", err)
	}
}

func TestDeadlines(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	start := time.Now()
	server.SetReadDeadline(start.Add(quiet))
	_, err := server.Read(make([]byte, 1))
	if !isTimeout(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: got %v; want a net.Error timeout matching os.ErrDeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed < quiet {
		t.Fatalf("read timed out after %v; want at least %v", elapsed, quiet)
	}

	// A deadline moved into the past ends a pending read.
	server.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := server.Read(make([]byte, 1))
		done <- err
	}()
	server.SetReadDeadline(time.Now().Add(-time.Second))
	if err := <-done; !isTimeout(err) {
		t.Fatalf("pending read after its deadline moved to the past: got %v; want a timeout", err)
	}

	// Clearing the deadline makes reads work again; SetDeadline sets both.
	server.SetDeadline(time.Time{})
	write(t, client, "x")
	buf := make([]byte, 1)
	if _, err := server.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("read after clearing the deadline: got %q, %v; want x", buf, err)
	}
	server.SetDeadline(time.Now().Add(-time.Second))
	if _, err := server.Write([]byte("y")); !isTimeout(err) {
		t.Fatalf("write past SetDeadline: got %v; want a timeout", err)
	}
	if _, err := server.Read(buf); !isTimeout(err) {
		t.Fatalf("read past SetDeadline: got %v; want a timeout", err)
	}
}

func TestClose(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	// A pending read on the closing end returns net.ErrClosed.
	done := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 1))
		done <- err
	}()
	write(t, client, "bye")
	if err := client.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("pending read on a closed conn: got %v; want net.ErrClosed", err)
	}
	if err := client.Close(); err == nil {
		t.Fatalf("second close: got nil; want an error")
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed conn: got %v; want net.ErrClosed", err)
	}
	// The peer reads what was written, then EOF; its writes fail.
	readString(t, server, "bye")
	if _, err := server.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the peer closed: got %v; want io.EOF", err)
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after the peer closed: got %v; want EPIPE", err)
	}
}

func TestCloseEndsBlockedCalls(t *testing.T) {
	noLeaks(t)
	n := New()
	_, server := connect(t, n, "a", "b:1")
	ln := listen(t, n, "b:2")
	errs := make(chan error, 3)
	go func() { // blocks: nothing to read
		_, err := server.Read(make([]byte, 1))
		errs <- err
	}()
	go func() { // blocks: the buffer fills, nobody reads (the other way than the read
		// above: written towards it, the read could return these bytes, not an error)
		_, err := server.Write(make([]byte, StreamBuffer+1))
		errs <- err
	}()
	go func() { // blocks: nobody dials
		_, err := ln.Accept()
		errs <- err
	}()
	server.Close()
	ln.Close()
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatalf("a blocked call returned no error after Close")
			}
		case <-time.After(long):
			t.Fatalf("a blocked call did not return after Close")
		}
	}
}

func TestListenerCloseResetsUnaccepted(t *testing.T) {
	noLeaks(t)
	n := New()
	ln, err := n.Listen("b:1")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, n, "a", "b:1")
	ln.Close()
	c.SetReadDeadline(time.Now().Add(long))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a stream its listener never accepted: got %v; want ECONNRESET", err)
	}
}
