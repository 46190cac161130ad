package netsim

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestCutHoldsBytesAndHealDeliversInOrder(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	write(t, client, "early") // arrives before the cut: stays readable
	n.Cut("a", "b")
	write(t, client, "1")
	write(t, client, "23") // writes do not wait for the link
	write(t, server, "reply")
	readString(t, server, "early")
	readNothing(t, server)
	readNothing(t, client)

	n.Heal("b", "a")
	readString(t, server, "123")
	readString(t, client, "reply")
}

func TestCloseIsHeldLikeBytes(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	n.Cut("a", "b")
	write(t, client, "last")
	client.Close()
	readNothing(t, server) // neither the bytes nor the end of stream
	n.HealAll()
	readString(t, server, "last")
	server.SetReadDeadline(time.Now().Add(long))
	if _, err := server.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the held close: got %v; want EOF", err)
	}
}

func TestDialIntoCutTimesOut(t *testing.T) {
	noLeaks(t)
	n := New()
	listen(t, n, "b:1")
	n.Cut("a", "b")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	_, err := n.Dialer("a")(ctx, "b:1")
	if !isTimeout(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial into a cut: got %v; want a timeout matching context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed < quiet {
		t.Fatalf("dial failed after %v; want it to hang until the deadline, %v", elapsed, quiet)
	}
	// A cancelled context fails with its own error, not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := n.Dialer("a")(ctx, "b:1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with a cancelled context: got %v; want context.Canceled", err)
	}
	// Nothing listening and cut: no refusal comes back either.
	if reachable(t, n, "a", "b:2") {
		t.Fatalf("dial to a closed port across a cut connected")
	}
}

func TestDialHangingInCutConnectsOnHeal(t *testing.T) {
	noLeaks(t)
	n := New()
	ln := listen(t, n, "b:1")
	n.Cut("a", "b")
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), long)
		defer cancel()
		c, err := n.Dialer("a")(ctx, "b:1")
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("dial across a cut returned %v, %v; want it to hang", r.c, r.err)
	case <-time.After(quiet):
	}
	n.Heal("a", "b")
	r := <-done
	if r.err != nil {
		t.Fatalf("dial after heal: %v", r.err)
	}
	defer r.c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	s.Close()
}

func TestPartitionAndIsolate(t *testing.T) {
	noLeaks(t)
	n := New()
	for _, addr := range []string{"a:1", "b:1", "c:1", "d:1"} {
		listen(t, n, addr)
	}
	n.Partition([]string{"a", "b"}, []string{"c", "d:1"}) // a host:port stands for its host
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"a", "b:1", true}, {"c", "d:1", true},
		{"a", "c:1", false}, {"d", "b:1", false}, {"c", "a:1", false},
	} {
		if got := reachable(t, n, tc.from, tc.to); got != tc.want {
			t.Errorf("after Partition: %s reaches %s: %v; want %v", tc.from, tc.to, got, tc.want)
		}
	}
	n.HealAll()
	n.Isolate("b")
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"a", "b:1", false}, {"b", "d:1", false}, {"b", "b:1", true}, {"a", "c:1", true},
	} {
		if got := reachable(t, n, tc.from, tc.to); got != tc.want {
			t.Errorf("after Isolate: %s reaches %s: %v; want %v", tc.from, tc.to, got, tc.want)
		}
	}
	n.Heal("b", "a")
	if !reachable(t, n, "a", "b:1") || reachable(t, n, "c", "b:1") {
		t.Errorf("after Heal(b, a): want a to reach b and c not to")
	}
}

func TestHoldIsOneWay(t *testing.T) {
	noLeaks(t)
	n := New()
	client, server := connect(t, n, "a", "b:1")
	n.Hold("b", "a") // the server's replies are lost; requests still arrive
	write(t, client, "request")
	readString(t, server, "request")
	write(t, server, "reply")
	readNothing(t, client)
	if reachable(t, n, "a", "b:1") {
		t.Fatalf("dial while replies are held connected; want it to hang (SYN-ACK lost)")
	}
	n.Release("b", "a")
	readString(t, client, "reply")

	n.Cut("a", "b")
	n.Release("a", "b") // releases a hold only: the cut stays
	if reachable(t, n, "a", "b:1") {
		t.Fatalf("Release undid a Cut")
	}
}

func TestDelay(t *testing.T) {
	noLeaks(t)
	n := New()
	const d = 300 * time.Millisecond
	client, server := connect(t, n, "a", "b:1")
	n.Delay("a", "b", d)
	start := time.Now()
	write(t, client, "slow")
	write(t, server, "fast")
	readString(t, client, "fast")
	if elapsed := time.Since(start); elapsed >= d {
		t.Errorf("the undelayed direction took %v; want under %v", elapsed, d)
	}
	readString(t, server, "slow")
	if elapsed := time.Since(start); elapsed < d {
		t.Errorf("delayed bytes arrived after %v; want at least %v", elapsed, d)
	}

	// Bytes keep their order when the delay is cleared behind them.
	write(t, client, "1")
	n.Delay("a", "b", 0)
	write(t, client, "2")
	readString(t, server, "12")

	// A dial waits for the round trip.
	n.Delay("b", "a", d)
	start = time.Now()
	dial(t, n, "a", "b:1")
	if elapsed := time.Since(start); elapsed < d {
		t.Errorf("dial took %v; want at least the round trip %v", elapsed, d)
	}
}

func TestReset(t *testing.T) {
	noLeaks(t)
	n := New()
	ab, ba := connect(t, n, "a", "b:1")
	cb, bc := connect(t, n, "c", "b:2")
	write(t, ab, "lost")
	n.Reset("b", "a")
	for name, c := range map[string]net.Conn{"dialler": ab, "acceptor": ba} {
		c.SetDeadline(time.Now().Add(long))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s read after Reset: got %v; want ECONNRESET", name, err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s write after Reset: got %v; want ECONNRESET", name, err)
		}
	}
	// Other pairs and new streams are untouched.
	write(t, cb, "still")
	readString(t, bc, "still")
	c2, s2 := connect(t, n, "a", "b:3")
	write(t, c2, "new")
	readString(t, s2, "new")
}
