package h2grpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// UnaryHandler answers one unary call: it returns its answer serialized, appended to
// c.Out. Its error, when not nil, is the call's status (a status.Status error; any
// other error answers UNKNOWN).
type UnaryHandler func(ctx context.Context, c *Call) ([]byte, error)

// AsyncHandler answers one unary call without waiting: it calls reply once, from any
// goroutine, possibly before it returns, with the answer serialized (appended to c.Out)
// or the call's status error, as a UnaryHandler returns them. It runs on the
// connection's reader, so it must never wait itself: a handler whose work completes
// later (a forward to another node) returns and replies then, and the reader reads
// the next call meanwhile. c.Message is valid until it returns; c.Out is the call's
// until it replies.
type AsyncHandler func(ctx context.Context, c *Call, reply func(out []byte, err error))

// Call is one unary call.
type Call struct {
	Method        string   // "/package.Service/Method"
	Authorization string   // the "authorization" metadata, "" when absent
	Remote        net.Addr // the client's address
	Message       []byte   // the request, serialized; valid until the handler returns
	Out           []byte   // where to append the answer (it starts with gRPC's 5-byte prefix)
}

// Config is what a Server needs.
type Config struct {
	Unary  map[string]UnaryHandler // by full method name
	Async  map[string]AsyncHandler // by full method name; a method in both is Async's
	Others http.Handler            // every other call (grpc.Server)
	// Authorize, when set, is asked for every call of Unary and Async as its headers
	// come, before its request is read: an error (a gRPC status) refuses the call at
	// once, so a client without credentials holds no stream while it sends.
	Authorize func(method, authorization string, remote net.Addr) error
	// MaxStreams is the calls in flight per connection (default 128); more are
	// refused with REFUSED_STREAM, which gRPC clients retry.
	MaxStreams     uint32
	MaxRecvMsgSize int           // a request message's size cap (default 64 KiB)
	MaxHeaderBytes uint32        // a request header list's size cap (default 16 KiB)
	Handshake      time.Duration // the client's preface and settings must come within it (default 10 s)
	IdleTimeout    time.Duration // a connection with no call for this long is closed (default 5 min)
	WriteTimeout   time.Duration // a write the client does not take within it ends the connection (default 10 s)
	RequestTimeout time.Duration // a request must arrive whole within it of its headers (default 10 s; stall.go)
	// LongLived are the full methods of streams whose request lasts as long as the
	// stream by design (RLQS's StreamRateLimitQuotas): RequestTimeout spares them.
	LongLived map[string]bool
	Logger    *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxStreams == 0 {
		c.MaxStreams = 128
	}
	if c.MaxRecvMsgSize <= 0 {
		c.MaxRecvMsgSize = 64 << 10
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	if c.Handshake <= 0 {
		c.Handshake = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Others == nil {
		c.Others = http.HandlerFunc(unimplemented)
	}
	return c
}

// ErrServerStopped is Serve's error after Stop or GracefulStop.
var ErrServerStopped = errors.New("h2grpc: server stopped")

// Server serves gRPC on the listeners given to Serve.
type Server struct {
	cfg Config

	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	stopping bool
	conned   sync.WaitGroup // the connections' goroutines
	handlers sync.WaitGroup // the calls' handlers
}

// New returns a Server; it starts no goroutine until Serve. (It kept a pool of 64
// workers for UnaryHandlers once, for their grown stacks; rlsapi, its one user, serves
// with an AsyncHandler on the reader, so the pool sat idle: a UnaryHandler, which
// tests use, runs on a goroutine of its own.)
func New(cfg Config) *Server {
	return &Server{cfg: cfg.withDefaults(), lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}}
}

// Serve accepts connections on ln until Stop or GracefulStop; it returns
// ErrServerStopped then, else the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		ln.Close()
		return ErrServerStopped
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() { // out of descriptors and the like: wait, then go on
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			nc.Close()
			return ErrServerStopped
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.conned.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.conned.Done()
}

// GracefulStop stops accepting, tells every client to go away, and waits until the
// calls in flight have ended or ctx ends (then it closes what is left, as Stop).
func (s *Server) GracefulStop(ctx context.Context) {
	for _, c := range s.close() {
		c.goAway()
	}
	done := make(chan struct{})
	go func() { s.conned.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop()
		<-done
	}
	s.handlers.Wait()
}

// Stop closes every listener and connection at once; calls in flight are cancelled.
func (s *Server) Stop() {
	for _, c := range s.close() {
		c.shut(errors.New("server stopped"))
	}
	s.conned.Wait()
	s.handlers.Wait()
}

// close marks the server stopping, closes its listeners and returns its connections.
func (s *Server) close() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for ln := range s.lns {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// unimplemented answers other calls when Config.Others is not set.
func unimplemented(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/grpc")
	w.WriteHeader(http.StatusOK)
	w.Header().Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(int(codes.Unimplemented)))
	w.Header().Set(http.TrailerPrefix+"Grpc-Message", "unknown method "+r.URL.Path)
}
