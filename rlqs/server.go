package rlqs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlqs/fairshare"
)

// Config configures a Server.
type Config struct {
	Decider counter.Decider // decides the ledgers' reservations (a node's router)
	// Sharer computes fair shares where a bucket's demands meet (nil, or when it
	// fails: among this node's streams alone).
	Sharer fairshare.Sharer
	Name   string               // this node's, naming its streams cluster-wide
	Rules  func() *limits.Rules // the rules in force (nil: none loaded)
	// TTL is every assignment's assignment_time_to_live (default 5s): two or three of
	// the Envoys' reporting_interval, so that an assignment renewed at each report
	// never lapses while its stream lives.
	TTL time.Duration
	// Delivery bounds how long an assignment may take to reach its Envoy (default
	// 1s). An assignment is paid for until TTL and Delivery after it was sent: one
	// that arrived later could admit past what was paid for.
	Delivery       time.Duration
	DefaultBuckets int           // buckets of a limit that names none (default counter.DefaultBuckets)
	MaxKeyBytes    int           // the counters' key bound (default counter.DefaultMaxKeyBytes)
	Timeout        time.Duration // a report's reservations must be decided within it (default 2s)
	// SendTimeout ends a stream whose Envoy does not read its answers for that long
	// (default 10s), so that it holds no goroutine forever.
	SendTimeout time.Duration
	Now         func() time.Time // (nil: time.Now)
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Decider == nil:
		return errors.New("rlqs: Config.Decider is nil")
	case c.Rules == nil:
		return errors.New("rlqs: Config.Rules is nil")
	case c.TTL < 0 || c.TTL > time.Hour:
		return errors.New("rlqs: Config.TTL must be within 1h")
	case c.Delivery < 0 || c.Delivery > time.Minute:
		return errors.New("rlqs: Config.Delivery must be within 1m")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = 5 * time.Second
	}
	if c.Delivery == 0 {
		c.Delivery = time.Second
	}
	if c.DefaultBuckets <= 0 {
		c.DefaultBuckets = counter.DefaultBuckets
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = counter.DefaultMaxKeyBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// life is how long an assignment may admit after it was sent.
func (c Config) life() time.Duration { return c.TTL + c.Delivery }

// Server is the RateLimitQuotaService.
type Server struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	cfg     Config
	metrics *metrics
	streams atomic.Uint64      // ids given out
	local   *fairshare.Demands // fair shares when Config.Sharer has none
}

// New makes a Server; Register puts it on a gRPC server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, metrics: m, local: fairshare.New(2*cfg.life(), cfg.Now)}, nil
}

// Register serves s on g.
func (s *Server) Register(g grpc.ServiceRegistrar) { rlqspb.RegisterRateLimitQuotaServiceServer(g, s) }

// ServiceName is the service's full name (for health and reflection).
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// StreamMethod is the stream's full method name.
const StreamMethod = "/" + ServiceName + "/StreamRateLimitQuotas"

// StreamRateLimitQuotas answers each usage report with the assignments of its buckets.
func (s *Server) StreamRateLimitQuotas(g rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	st := &stream{s: s, name: s.cfg.Name + "/" + strconv.FormatUint(s.streams.Add(1), 10), buckets: map[string]*held{}}
	s.metrics.streams.Inc()
	defer func() {
		s.metrics.streams.Dec()
		s.metrics.buckets.Sub(float64(len(st.buckets)))
	}()
	for {
		rep, err := g.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := st.report(g.Context(), rep)
		if err != nil {
			return err
		}
		if len(resp.GetBucketAction()) == 0 {
			continue
		}
		if err := s.send(g, resp); err != nil {
			return err
		}
	}
}

// send sends resp, or gives up on a client that has not read for SendTimeout: the
// stream then ends, and its Envoy's assignments run out their time to live.
func (s *Server) send(g rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer, resp *rlqspb.RateLimitQuotaResponse) error {
	done := make(chan error, 1)
	go func() { done <- g.Send(resp) }()
	t := time.NewTimer(s.cfg.SendTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		s.metrics.stalled.Inc()
		return status.Errorf(codes.DeadlineExceeded, "rlqs: the client read no answer for %s", s.cfg.SendTimeout)
	}
}

// share is a stream's fair share of a bucket: from the Sharer, else from this node's
// streams alone.
func (s *Server) share(ctx context.Context, req fairshare.Request) float64 {
	if s.cfg.Sharer != nil {
		v, err := s.cfg.Sharer.Share(ctx, req)
		if err == nil {
			return v
		}
		s.metrics.localShares.Inc()
		s.cfg.Logger.Debug("rlqs: a fair share computed from this node's streams alone", "bucket", req.Bucket, "err", err)
	}
	return s.local.Share(req)
}
