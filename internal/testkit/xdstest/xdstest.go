// Package xdstest runs go-control-plane's own xDS management server (pkg/server/v3,
// state of the world, over its snapshot cache) on a loopback port for tests, serving
// rate limit configs (ratelimit.config.ratelimit.v3.RateLimitConfig), and records every
// request its clients send, every response it sends and the headers of every stream
// its clients open.
package xdstest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Server is a running management server.
type Server struct {
	Addr   string
	cache  cachev3.SnapshotCache
	grpc   *grpc.Server
	cancel context.CancelFunc

	mu      sync.Mutex
	reqs    []*discoverypb.DiscoveryRequest
	times   []time.Time // when each of reqs came
	resps   []*discoverypb.DiscoveryResponse
	headers []metadata.MD
}

// Start serves on addr ("127.0.0.1:0": any free port; an old server's Addr: the same
// port again) until Stop or the end of the test.
func Start(tb testing.TB, addr string) *Server {
	tb.Helper()
	return StartTLS(tb, addr, nil)
}

// StartTLS is Start over TLS with conf (nil: plaintext).
func StartTLS(tb testing.TB, addr string, conf *tls.Config) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	var opts []grpc.ServerOption
	if conf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(conf)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Addr: ln.Addr().String(), cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil), grpc: grpc.NewServer(opts...), cancel: cancel}
	cb := serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			s.mu.Lock()
			s.headers = append(s.headers, md.Copy())
			s.mu.Unlock()
			return nil
		},
		StreamRequestFunc: func(_ int64, r *discoverypb.DiscoveryRequest) error {
			s.mu.Lock()
			s.reqs = append(s.reqs, proto.Clone(r).(*discoverypb.DiscoveryRequest))
			s.times = append(s.times, time.Now())
			s.mu.Unlock()
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoverypb.DiscoveryRequest, r *discoverypb.DiscoveryResponse) {
			s.mu.Lock()
			s.resps = append(s.resps, proto.Clone(r).(*discoverypb.DiscoveryResponse))
			s.mu.Unlock()
		},
	}
	discoverypb.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(ctx, s.cache, cb))
	go s.grpc.Serve(ln)
	tb.Cleanup(s.Stop)
	return s
}

// Stop ends every stream and closes the port.
func (s *Server) Stop() {
	s.cancel()
	s.grpc.Stop()
}

// Set makes configs, as version, the snapshot of the node named node.
func (s *Server) Set(tb testing.TB, node, version string, configs ...*rlconf.RateLimitConfig) {
	tb.Helper()
	res := make([]cachetypes.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]cachetypes.Resource{resource.RateLimitConfigType: res})
	if err == nil {
		err = s.cache.SetSnapshot(context.Background(), node, snap)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// Requests is every request received, in order.
func (s *Server) Requests() []*discoverypb.DiscoveryRequest { return copyOf(s, &s.reqs) }

// RequestTimes is when each request of Requests came.
func (s *Server) RequestTimes() []time.Time { return copyOf(s, &s.times) }

// Responses is every response sent, in order.
func (s *Server) Responses() []*discoverypb.DiscoveryResponse { return copyOf(s, &s.resps) }

// Headers is the metadata of each stream opened, in order.
func (s *Server) Headers() []metadata.MD { return copyOf(s, &s.headers) }

// copyOf is a copy of *xs, taken under s.mu.
func copyOf[T any](s *Server, xs *[]T) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(*xs)
}

// WaitFor waits up to timeout for a request match holds for and returns the first;
// what names it in the failure.
func (s *Server) WaitFor(tb testing.TB, timeout time.Duration, what string, match func(*discoverypb.DiscoveryRequest) bool) *discoverypb.DiscoveryRequest {
	tb.Helper()
	var found *discoverypb.DiscoveryRequest
	wait.For(tb, timeout, func() error {
		for _, r := range s.Requests() {
			if match(r) {
				found = r
				return nil
			}
		}
		return fmt.Errorf("the server saw no %s among %d requests", what, len(s.Requests()))
	})
	return found
}

// Acked waits for the ACK of version: a request that names it with a response's
// nonce and no error.
func (s *Server) Acked(tb testing.TB, timeout time.Duration, version string) *discoverypb.DiscoveryRequest {
	tb.Helper()
	return s.WaitFor(tb, timeout, "ACK of version "+version, func(r *discoverypb.DiscoveryRequest) bool {
		return r.GetVersionInfo() == version && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
	})
}

// Nacked waits for a NACK (a request with an error detail) and returns it.
func (s *Server) Nacked(tb testing.TB, timeout time.Duration) *discoverypb.DiscoveryRequest {
	tb.Helper()
	return s.WaitFor(tb, timeout, "NACK", func(r *discoverypb.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
}

// Limit is a RateLimitConfig of one domain with one descriptor, key=value (value ""
// for the key alone) limited to n per unit.
func Limit(name, domain, key, value string, n uint32, unit rlconf.RateLimitUnit) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: key, Value: value, RateLimit: &rlconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}}}}
}
