package respapi

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// wait fails the test unless ch delivers within a generous deadline.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func serveInBackground(t *testing.T, srv *Server) (net.Listener, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return ln, served
}

func newServer(t *testing.T, decider counter.Decider) *Server {
	t.Helper()
	srv, err := New(Config{Decider: decider})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return srv
}

func TestCloseEndsServeAndConnections(t *testing.T) {
	srv := newServer(t, &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now})
	ln, served := serveInBackground(t, srv)
	ts := &testServer{addr: ln.Addr().String()}
	c := ts.dial(t)
	wantReply(t, c.do("PING"), "+PONG")
	if got := srv.Addr().String(); got != ln.Addr().String() {
		t.Fatalf("Addr: got %s; want %s", got, ln.Addr())
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := wait(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: got %v after Close; want nil", err)
	}
	c.wantClosed()
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatalf("dial after Close: got a connection; want it refused")
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseBeforeServe(t *testing.T) {
	srv := newServer(t, &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now})
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, served := serveInBackground(t, srv)
	if err := wait(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve after Close: got %v; want nil", err)
	}
}

// blocking decides no batch until its context ends, as a call to an owner that does
// not answer would; entered hears of each batch.
func blocking(entered chan struct{}) counter.Decider {
	return counter.Waiting(func(ctx context.Context, _ []counter.Op, results []counter.Result) {
		entered <- struct{}{}
		<-ctx.Done()
		for i := range results {
			results[i] = counter.Result{Err: counter.ErrShuttingDown}
		}
	})
}

func TestCloseCancelsDecisionsInFlight(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := newServer(t, blocking(entered))
	ln, served := serveInBackground(t, srv)
	c := (&testServer{addr: ln.Addr().String()}).dial(t)
	c.write(encode("SW.INCR", "k", "1m"))
	wait(t, entered, "the batch to be with the Decider")
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if err := wait(t, closed, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wait(t, served, "Serve to return")
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatalf("New without a Decider: got no error; want one")
	}
	reg := prometheus.NewRegistry()
	cfg := Config{Decider: &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now}, Registerer: reg}
	if _, err := New(cfg); err != nil {
		t.Fatalf("first New: %v", err)
	}
	if _, err := New(cfg); err == nil {
		t.Fatalf("second New on the same registry: got no error; want one")
	}
}
