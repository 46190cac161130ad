package respapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/redcon"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/connlimit"
)

// Config is what New needs. Only Doer is required.
type Config struct {
	Doer   counter.Doer   // decides the ops
	Limits counter.Limits // bounds checked before an op reaches Doer

	// Token, when not empty, must be given with AUTH (or HELLO 2 AUTH) before any
	// command but AUTH, HELLO and QUIT; the others get -NOAUTH, as in Redis.
	Token string

	// MaxUnanswered bounds the bytes a client may send without getting any reply
	// (default 1 MiB): a command that large, such as one huge argument, gets
	// "-ERR Protocol error: request too large" and the connection is closed, so one
	// client cannot make the server buffer without limit. Every reply resets the count,
	// so pipelines of any length are fine.
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
	// AuthLimiter limits wrong AUTH guesses per source address: a source over its
	// budget is answered "-ERR too many failed AUTH attempts; retry later", unchecked,
	// and closed. Give the HTTP front end the same one, so a guesser has one budget.
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

// Server serves RESP on a listener.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	start   time.Time
	limiter *authlimit.Limiter

	ctx    context.Context // of every Do call; Close cancels it
	cancel context.CancelFunc

	nextID    atomic.Int64   // connection ids, as HELLO reports them
	connected atomic.Int64   // open connections, for INFO
	conns     sync.WaitGroup // one per open connection, so Close can wait for them

	mu     sync.Mutex
	lns    []*listener // Serve's and ServeCluster's, the first one's address is Addr
	closed bool
}

// listener is one address the server serves.
type listener struct {
	ln      *connlimit.Listener
	served  chan struct{} // closed when its Serve returns
	cluster bool          // ServeCluster's: keys of other nodes are redirected
}

// New builds a server; Serve starts it. It fails when Doer is nil or the metrics
// cannot be registered (for example, a second server on the same Registerer).
func New(cfg Config) (*Server, error) {
	if cfg.Doer == nil {
		return nil, errors.New("respapi: Config.Doer is nil")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, start: time.Now(), limiter: cfg.AuthLimiter}
	m, err := newMetrics(cfg.Registerer, s.refusedCount)
	if err != nil {
		return nil, err
	}
	s.metrics = m
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
// decided through the Doer, whichever node owns it: what any Redis client expects.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, false) }

// ServeCluster is Serve for clients that speak the Redis Cluster protocol: an op on a
// key that Config.Cluster says another node serves is answered -MOVED with that
// node's address instead of being forwarded. Each listener keeps at most MaxClients
// connections.
func (s *Server) ServeCluster(ln net.Listener) error { return s.serve(ln, true) }

func (s *Server) serve(ln net.Listener, cluster bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	l := &listener{ln: connlimit.New(ln, s.cfg.MaxClients, "-ERR max number of clients reached\r\n"),
		served: make(chan struct{}), cluster: cluster}
	s.lns = append(s.lns, l)
	s.mu.Unlock()
	defer close(l.served)
	rs := redcon.NewServer("", s.serveCommand, func(conn redcon.Conn) bool { return s.accept(conn, cluster) }, s.closedConn)
	rs.AcceptError = s.acceptError
	return rs.Serve(capListener{l.ln, s.connConfig()})
}

// connConfig is Config as every connection takes it, defaults filled in.
func (s *Server) connConfig() connConfig {
	cc := connConfig{max: s.cfg.MaxUnanswered, idle: max(s.cfg.IdleTimeout, 0), write: s.cfg.WriteTimeout}
	if cc.max <= 0 {
		cc.max = DefaultMaxUnanswered
	}
	if cc.write <= 0 {
		cc.write = DefaultWriteTimeout
	}
	if s.cfg.Token != "" {
		if cc.auth = s.cfg.AuthTimeout; cc.auth <= 0 {
			cc.auth = DefaultAuthTimeout
		}
	}
	return cc
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

// Close stops the server: it closes the listener and every connection, cancels the
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
		// Serve then returns, and redcon closes every connection on the way out.
		if e := l.ln.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = errors.Join(err, e)
		}
		<-l.served
	}
	s.conns.Wait()
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

// client is the state of one connection.
type client struct {
	conn   redcon.Conn
	cc     *capConn   // the connection redcon reads; nil if it is not one (never in Serve)
	source netip.Addr // the client's address, as the AUTH limiter counts it
	id     int64
	authed bool
	quit   bool // QUIT was answered: the rest of the pipeline is dropped
	// redirect: the connection came to ServeCluster's listener, so keys another node
	// serves are answered -MOVED.
	redirect bool
	multi    *transaction // non-nil between MULTI and EXEC or DISCARD

	pipeline []redcon.Command // the commands being answered; kept to reuse its array
	batch    batch
}

func (s *Server) accept(conn redcon.Conn, redirect bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns.Add(1)
	s.connected.Add(1)
	nc := conn.NetConn()
	cc, _ := nc.(*capConn)
	conn.SetContext(&client{conn: conn, cc: cc, source: authlimit.Source(nc.RemoteAddr()),
		id: s.nextID.Add(1), authed: s.cfg.Token == "", redirect: redirect && s.cfg.Cluster != nil})
	return true
}

func (s *Server) closedConn(conn redcon.Conn, err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("resp connection ended", "remote", conn.RemoteAddr(), "err", err)
	}
	var pe *protocolError
	var de *dropError
	switch {
	case errors.As(err, &pe):
		s.metrics.dropped[dropProtocol].Inc()
	case errors.As(err, &de):
		s.metrics.dropped[de.reason].Inc()
	}
	s.connected.Add(-1)
	s.conns.Done()
}

// acceptError logs a failed Accept and pauses, so that a lasting failure (out of file
// descriptors, say) does not spin: redcon retries at once.
func (s *Server) acceptError(err error) {
	s.log.Warn("resp accept failed", "err", err)
	time.Sleep(10 * time.Millisecond)
}
