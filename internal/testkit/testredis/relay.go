package testredis

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay in front of a Server, on loopback, that a test can cut: one
// client's way to Redis goes away (its connections reset, new ones closed at once)
// while Redis itself and every other client go on.
type Relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Relay starts a relay to s; it closes when the test ends.
func (s *Server) Relay(tb testing.TB) *Relay {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Relay{ln: ln, target: s.Addr(), conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	tb.Cleanup(r.close)
	return r
}

// URL is the relay's redis:// URL.
func (r *Relay) URL() string { return "redis://" + r.ln.Addr().String() + "/0" }

// Cut resets every connection through the relay and closes new ones until Heal.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (r *Relay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}

func (r *Relay) close() {
	r.ln.Close()
	r.Cut()
	r.wg.Wait()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		if !r.track(c, up) {
			continue
		}
		r.wg.Add(2)
		go r.pipe(c, up)
		go r.pipe(up, c)
	}
}

// track registers a relayed pair, or closes it while the relay is cut.
func (r *Relay) track(c, up net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		c.Close()
		up.Close()
		return false
	}
	r.conns[c], r.conns[up] = struct{}{}, struct{}{}
	return true
}

func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
}
