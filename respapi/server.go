package respapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/connlimit"
	"github.com/leapcount/leapcount/internal/opmetrics"
)

// Config is what New needs. Only Decider is required.
type Config struct {
	Decider counter.Decider // decides the ops
	Limits  counter.Limits  // bounds checked before an op reaches Decider

	// Token, when not empty, must be given with AUTH (or HELLO 2 AUTH) before any
	// command but AUTH, HELLO and QUIT; the others get -NOAUTH, as in Redis.
	Token string

	// MaxUnanswered bounds the bytes the server holds of what a client sent and it has
	// not answered yet (default 1 MiB): a command that large, such as one huge
	// argument, or a pipeline sent on and on while its connection waits for a batch,
	// gets "-ERR Protocol error: request too large" and the connection is closed, so
	// one client cannot make the server buffer without limit. Whole commands are
	// answered as they arrive, so pipelines of any length are fine.
	MaxUnanswered int64

	// MaxClients caps the open connections (0: no cap). A connection over it is sent
	// "-ERR max number of clients reached" and closed, as Redis does.
	MaxClients int
	// IdleTimeout closes a connection that sends nothing for this long (0: never, as
	// Redis's "timeout 0").
	IdleTimeout time.Duration
	// WriteTimeout bounds each write of replies (0: DefaultWriteTimeout), so a client
	// that stops reading them is dropped instead of holding its connection.
	WriteTimeout time.Duration
	// AuthTimeout is how long a new connection has to authenticate (AUTH or HELLO
	// AUTH) when Token is set, before it is closed (0: DefaultAuthTimeout).
	AuthTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS client's handshake (0: DefaultTLSHandshakeTimeout):
	// a connection that has not finished it by then is closed.
	TLSHandshakeTimeout time.Duration
	// AuthLimiter limits wrong AUTH guesses per source address: a wrong guess from a
	// source over its budget is answered "-ERR too many failed AUTH attempts; retry
	// later" and closed (a right one passes). Give the HTTP front end the same one, so a guesser has one budget.
	// nil: a limiter of this server's own, with authlimit's defaults.
	AuthLimiter *authlimit.Limiter

	Registerer prometheus.Registerer // where the command metrics go; nil: not registered
	Logger     *slog.Logger          // nil: discard
	Info       func() string         // more INFO text, in Redis's "# Section\nkey:value" form; may be nil

	// Cluster, when set, answers the CLUSTER commands and tells ServeCluster's
	// connections where keys of other nodes are served. nil: CLUSTER answers that
	// cluster support is disabled, as a standalone Redis does.
	Cluster Cluster
}

// Server serves RESP on listeners.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	start   time.Time
	limiter *authlimit.Limiter
	conn    connConfig

	ctx    context.Context // of every Do call; Close cancels it
	cancel context.CancelFunc

	nextID    atomic.Int64   // connection ids, as HELLO reports them
	connected atomic.Int64   // open connections, for INFO
	conns     sync.WaitGroup // one per open connection, so Close can wait for them
	parked    sync.WaitGroup // one per session serving on a goroutine of its own (loop.go)

	mu     sync.Mutex
	lns    []*listener // Serve's and ServeCluster's, the first one's address is Addr
	loops  *loops      // the event loops, started by the first Serve; nil before
	open   map[*session]net.Conn
	closed bool
}

// listener is one address the server serves.
type listener struct {
	ln      *connlimit.Listener
	served  chan struct{} // closed when its Serve returns
	cluster bool          // ServeCluster's: keys of other nodes are redirected
	tls     *tls.Config   // ServeTLS's: nil for plaintext
}

// New builds a server; Serve starts it. It fails when Decider is nil or the metrics
// cannot be registered (for example, a second server on the same Registerer).
func New(cfg Config) (*Server, error) {
	if cfg.Decider == nil {
		return nil, errors.New("respapi: Config.Decider is nil")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, start: time.Now(), limiter: cfg.AuthLimiter, open: map[*session]net.Conn{}}
	s.conn = cfg.connConfig()
	m, err := newMetrics(cfg.Registerer, s.refusedCount)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if m.opErrs, err = opmetrics.New(cfg.Registerer, "resp"); err != nil {
		return nil, err
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.limiter == nil {
		s.limiter = authlimit.New(authlimit.Config{})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln until Close; it then returns nil. Every key is
// decided through the Decider, whichever node owns it: what any Redis client expects.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, false, nil) }

// ServeCluster is Serve for clients that speak the Redis Cluster protocol: an op on a
// key that Config.Cluster says another node serves is answered -MOVED with that
// node's address instead of being forwarded. Each listener keeps at most MaxClients
// connections.
func (s *Server) ServeCluster(ln net.Listener) error { return s.serve(ln, true, nil) }

// ServeTLS is Serve (cluster false) or ServeCluster (cluster true) over TLS: each
// connection runs the handshake of conf, then is served on a goroutine of its own
// (tls.go), never on the event loops, which serve plaintext sockets only. ln is a
// plain TCP listener; conf must hold a certificate (or a GetConfigForClient).
func (s *Server) ServeTLS(ln net.Listener, conf *tls.Config, cluster bool) error {
	if conf == nil {
		return errors.New("respapi: ServeTLS without a TLS configuration")
	}
	return s.serve(ln, cluster, conf)
}

func (s *Server) serve(ln net.Listener, cluster bool, conf *tls.Config) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	refusal := "-ERR max number of clients reached\r\n"
	if conf != nil {
		refusal = "" // a TLS client could not read it: the connection is only closed
	}
	l := &listener{ln: connlimit.New(ln, s.cfg.MaxClients, refusal),
		served: make(chan struct{}), cluster: cluster, tls: conf}
	s.lns = append(s.lns, l)
	s.mu.Unlock()
	defer close(l.served)
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.acceptError(err)
			continue
		}
		s.accept(nc, l)
	}
}

// accept serves a new connection: on the event loops if it is a plaintext socket they
// can poll, on a goroutine of its own otherwise (TLS, or an in-process connection in
// tests).
func (s *Server) accept(nc net.Conn, l *listener) {
	ss := newSession(s, nc.RemoteAddr(), l.cluster, false)
	if s.conn.auth > 0 {
		ss.c.authBy.Store(time.Now().Add(s.conn.auth).UnixNano())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns.Add(1)
	s.connected.Add(1)
	s.open[ss] = nc
	if l.tls != nil {
		s.mu.Unlock()
		ss.c.mayWait = true
		go s.streamTLS(nc, l.tls, ss)
		return
	}
	loops, err := s.startLoops()
	s.mu.Unlock()
	if err == nil {
		if raw, ok := pollable(nc); ok {
			if err = loops.enroll(nc, raw, ss); err != nil {
				s.log.Warn("resp event loop refused a connection", "remote", nc.RemoteAddr(), "err", err)
				s.closedConn(ss, nc)
			}
			return
		}
	}
	ss.c.mayWait = true
	go s.stream(nc, ss)
}

// pollable returns the socket under nc, if the event loops can serve it.
func pollable(nc net.Conn) (syscall.Conn, bool) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = u.NetConn()
	}
	switch c := nc.(type) {
	case *net.TCPConn:
		return c, true
	case *net.UnixConn:
		return c, true
	}
	return nil, false
}

// closedConn is the end of a connection, however it was served.
func (s *Server) closedConn(ss *session, nc net.Conn) {
	nc.Close() // gives the connection's place under MaxClients back
	s.mu.Lock()
	delete(s.open, ss)
	s.mu.Unlock()
	s.connected.Add(-1)
	s.conns.Done()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// refusedCount is how many connections were refused for being over MaxClients.
func (s *Server) refusedCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(0)
	for _, l := range s.lns {
		n += l.ln.Refused()
	}
	return float64(n)
}

// Close stops the server: it closes the listeners and every connection, cancels the
// Do calls in flight, and returns once Serve and every connection have finished.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	lns := s.lns
	s.mu.Unlock()
	s.cancel()
	var err error
	for _, l := range lns {
		if e := l.ln.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = errors.Join(err, e)
		}
		<-l.served
	}
	s.mu.Lock()
	var closers []func()
	for ss, nc := range s.open {
		if ss.loop != nil {
			closers = append(closers, ss.loop.Close)
		} else {
			closers = append(closers, func() { nc.Close() }) // its goroutine's read fails, and it ends
		}
	}
	loops := s.loops
	s.mu.Unlock()
	for _, close := range closers { // not under s.mu: closing a connection takes it
		close()
	}
	s.conns.Wait()
	s.parked.Wait()
	if loops != nil {
		loops.stop()
	}
	return err
}

// Addr is the address Serve listens on, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].ln.Addr()
}

// acceptError logs a failed Accept and pauses, so that a lasting failure (out of file
// descriptors, say) does not spin.
func (s *Server) acceptError(err error) {
	s.log.Warn("resp accept failed", "err", err)
	time.Sleep(10 * time.Millisecond)
}
