package rlsapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // clients that compress their calls (grpc.Server serves those)
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/opmetrics"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlsapi/internal/h2grpc"
)

// Config is what a Server needs.
type Config struct {
	Decider counter.Decider
	Rules   func() *limits.Rules // the rules in force (nil: none loaded)
	// Token, when not empty, is required in the "authorization" metadata as
	// "Bearer <token>"; health checks go without it.
	Token       string
	AuthLimiter *authlimit.Limiter // wrong guesses per source (nil: one of its own)
	// ResponseHeaders adds RateLimit-Limit, -Remaining and -Reset of the descriptor
	// closest to its limit (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED).
	ResponseHeaders bool
	// DeniedConsumesNothing makes a request that one descriptor denies count in none of
	// its others, in every domain (a domain's denied_consumes_nothing does it for that
	// domain alone).
	DeniedConsumesNothing bool
	DefaultBuckets        int              // buckets of a limit that names none (default counter.DefaultBuckets)
	MaxDescriptors        int              // per request (default 64)
	MaxMessageBytes       int              // a request's size cap (default 64 KiB)
	MaxStreams            uint32           // concurrent calls per connection (default 128)
	HandshakeTimeout      time.Duration    // a connection's TLS handshake and HTTP/2 preface must end within it (default 10s)
	RequestTimeout        time.Duration    // a request must arrive whole within it of its headers (default 10s)
	Timeout               time.Duration    // a call's longest decision, whatever its deadline (default 5s)
	MaxKeyBytes           int              // the counters' key bound (default counter.DefaultMaxKeyBytes)
	Ready                 func() bool      // health: SERVING while it reports true (nil: always)
	Now                   func() time.Time // the wall clock of duration_until_reset (nil: time.Now)
	Registerer            prometheus.Registerer
	Logger                *slog.Logger
	// Services are more services served on the port (RLQS): registered on its
	// grpc.Server (so reflection lists them) and reported by its health.
	Services []Service
}

// Service is one more gRPC service of the port.
type Service struct {
	Name     string                      // its full name, as health knows it
	Register func(grpc.ServiceRegistrar) // puts it on the port's grpc.Server
	Streams  []string                    // its long-lived streams' full methods (h2grpc.Config.LongLived)
}

func (c Config) withDefaults() Config {
	if c.DefaultBuckets <= 0 {
		c.DefaultBuckets = counter.DefaultBuckets
	}
	if c.MaxDescriptors <= 0 {
		c.MaxDescriptors = 64
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 128
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = counter.DefaultMaxKeyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.AuthLimiter == nil {
		c.AuthLimiter = authlimit.New(authlimit.Config{})
	}
	return c
}

// Server is the gRPC front end.
type Server struct {
	rlspb.UnimplementedRateLimitServiceServer
	cfg       Config
	grpc      *grpc.Server // every call but ShouldRateLimit, through fast
	fast      *h2grpc.Server
	health    *health.Server
	metrics   *metrics
	opErrs    *opmetrics.Errors
	undecided atomic.Int64
	stop      chan struct{}
	watching  sync.Once // watchReady runs once, however many listeners Serve serves
}

// New returns a Server; Serve runs it.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Decider == nil || cfg.Rules == nil {
		return nil, errors.New("rlsapi: Config needs Decider and Rules")
	}
	s := &Server{cfg: cfg, health: health.NewServer(), stop: make(chan struct{})}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.opErrs, err = opmetrics.New(cfg.Registerer, "grpc"); err != nil {
		return nil, err
	}
	// grpc-go's server sees only the calls h2grpc hands it, one ServeHTTP each, never a
	// connection: the options of its own transport (MaxConcurrentStreams, which it counts
	// per ServeHTTP, ConnectionTimeout, KeepaliveParams, KeepaliveEnforcementPolicy) do
	// nothing there, and h2grpc's Config holds what they meant (MaxStreams, Handshake,
	// IdleTimeout; it answers every PING). NumStreamWorkers kept 64 goroutines for calls
	// that each already come on a goroutine of h2grpc's (health, reflection, compressed
	// calls): gone since ShouldRateLimit left grpc-go's server.
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(s.metrics.observe, s.authorize),
	)
	rlspb.RegisterRateLimitServiceServer(s.grpc, s)
	longLived := map[string]bool{}
	for _, svc := range cfg.Services {
		svc.Register(s.grpc)
		for _, m := range svc.Streams {
			longLived[m] = true
		}
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	// ShouldRateLimit is served by a call path of our own, every other call by
	// grpc.Server (package h2grpc says why).
	s.fast = h2grpc.New(h2grpc.Config{
		Async:          map[string]h2grpc.AsyncHandler{shouldRateLimitMethod: s.shouldRateLimitCall},
		Authorize:      s.authorizeCall,
		Others:         s.grpc,
		MaxStreams:     cfg.MaxStreams,
		MaxRecvMsgSize: cfg.MaxMessageBytes,
		Handshake:      cfg.HandshakeTimeout, // h2grpc's default when zero: 10 s
		RequestTimeout: cfg.RequestTimeout,
		IdleTimeout:    5 * time.Minute,
		LongLived:      longLived,
		Logger:         cfg.Logger,
	})
	return s, nil
}

// shouldRateLimitMethod is ShouldRateLimit's full gRPC method name.
const shouldRateLimitMethod = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// decodeError is the status of a request decodeRequest refused: as grpc.Server
// answers a message it cannot unmarshal, or as validate answers too many descriptors.
func decodeError(err error) error {
	var many *tooManyDescriptors
	if errors.As(err, &many) {
		return status.Error(codes.InvalidArgument, many.Error())
	}
	return status.Errorf(codes.Internal, "grpc: error unmarshalling request: proto: %v", err)
}

// Serve answers on ln until Stop; it returns nil after Stop. It may serve several
// listeners at once (a plaintext one and a TLS one: a tls.Listener whose configuration
// offers "h2" by ALPN, as gRPC clients require).
func (s *Server) Serve(ln net.Listener) error {
	s.watching.Do(func() { go s.watchReady() })
	err := s.fast.Serve(ln)
	if errors.Is(err, h2grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// watchReady keeps the health status in step with Ready.
func (s *Server) watchReady() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if s.cfg.Ready != nil && !s.cfg.Ready() {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		s.health.SetServingStatus("", st)
		s.health.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, st)
		for _, svc := range s.cfg.Services {
			s.health.SetServingStatus(svc.Name, st)
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// Stop ends the calls in flight within ctx, then closes every connection.
func (s *Server) Stop(ctx context.Context) {
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	s.health.Shutdown()
	s.fast.GracefulStop(ctx)
	s.grpc.Stop()
}

// ShouldRateLimit answers one request (rls.proto).
func (s *Server) ShouldRateLimit(ctx context.Context, pb *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	req := fromProto(pb)
	rules, err := s.rulesFor(req)
	if err != nil {
		return nil, err
	}
	return s.decide(ctx, req, rules, s.cfg.Now())
}

// callContext bounds a call by the server's timeout, unless the caller's deadline is
// sooner.
func (s *Server) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	// Envoy sends its own timeout (20 ms by default), nearly always sooner than ours;
	// a timer of our own would then cost an allocation and a timer per call for nothing.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.cfg.Timeout {
		return context.WithTimeout(ctx, s.cfg.Timeout)
	}
	return ctx, func() {}
}

// rulesFor returns the rules in force, or UNAVAILABLE when there are none and req does
// not carry every limit itself.
func (s *Server) rulesFor(req *request) (*limits.Rules, error) {
	rules := s.cfg.Rules()
	if rules == nil && !hasOverrides(req) {
		return nil, status.Error(codes.Unavailable, errNoConfig.Error())
	}
	return rules, nil
}

func hasOverrides(req *request) bool {
	for i := range req.descriptors {
		if !req.descriptors[i].hasLimit {
			return false
		}
	}
	return len(req.descriptors) > 0
}

// Undecided counts the calls answered UNAVAILABLE because a counter was not decided.
func (s *Server) Undecided() int64 { return s.undecided.Load() }

func (s *Server) maxKey() int { return s.cfg.MaxKeyBytes }

// authorize checks the bearer token of every call but health checks, within the
// caller's budget of wrong guesses.
func (s *Server) authorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if s.cfg.Token == "" || strings.HasPrefix(info.FullMethod, "/grpc.health.v1.") {
		return next(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var auth string
	if v := md.Get("authorization"); len(v) > 0 {
		auth = v[0]
	}
	if err := s.checkToken(auth, peerSource(ctx)); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

// authorizeCall checks the token of a call on the own call path as its headers come
// (h2grpc.Config.Authorize), counting a refusal in the call metrics.
func (s *Server) authorizeCall(method, auth string, remote net.Addr) error {
	err := s.checkToken(auth, authlimit.Source(remote))
	if err != nil {
		s.metrics.code(s.metrics.method(method), status.Code(err)).Inc()
	}
	return err
}

// checkToken checks a call's authorization metadata against the token, within src's
// budget of wrong guesses; nil when no token is set.
func (s *Server) checkToken(auth string, src netip.Addr) error {
	if s.cfg.Token == "" {
		return nil
	}
	var guess string
	scheme, tok, _ := strings.Cut(auth, " ")
	if strings.EqualFold(scheme, "Bearer") {
		guess = strings.TrimSpace(tok)
	}
	if guess == "" {
		return status.Error(codes.Unauthenticated, "missing bearer token (authorization metadata)")
	}
	if subtle.ConstantTimeCompare([]byte(guess), []byte(s.cfg.Token)) == 1 {
		return nil // a right token is never refused
	}
	if ok, _ := s.cfg.AuthLimiter.Wrong(src); !ok {
		return status.Error(codes.ResourceExhausted, "too many failed authentication attempts; retry later")
	}
	return status.Error(codes.Unauthenticated, "wrong bearer token")
}
