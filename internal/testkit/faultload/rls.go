package faultload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/internal/testkit/history"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlsapi"
)

// RLSConfig shapes an RLS load: calls of one descriptor (Key, one of Values values)
// in Domain, whose rule limits each value to Limit hits in its window.
type RLSConfig struct {
	Domain  string
	Key     string
	Values  int   // default 4
	Limit   int64 // the rule's requests_per_unit
	Workers int   // default 4
	Seed    uint64
	Timeout time.Duration // per call, as Envoy's filter sets one (default 2s)
	Pace    time.Duration // between one worker's calls (default 5ms)
}

// RLS sends Envoy's ShouldRateLimit through random nodes' gRPC ports, as Envoy does,
// and records what each call was told. Every call counts its hit whether it is over
// the limit or not (as in envoyproxy/ratelimit), so each value's counter is an
// increment history (package history): its final count lies within acknowledged −
// allowed loss and acknowledged + unknown. An answer OK is an admission: those of one
// value never pass its limit, plus what a fault allows. A call answered with an error
// (UNAVAILABLE when a descriptor could not be decided, a deadline) may have counted:
// unknown; Envoy applies its failure_mode_deny to it.
type RLS struct {
	cfg    RLSConfig
	values []string
	keys   []string // the values' counter keys (rlsapi.CounterKey)
	addrs  atomic.Pointer[[]string]
	log    history.Log

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	admitted map[string]int64 // OK answers, per value
	byCode   map[codes.Code]int64
}

// NewRLS makes an RLS load sending through addrs (gRPC).
func NewRLS(cfg RLSConfig, addrs ...string) *RLS {
	if cfg.Values <= 0 {
		cfg.Values = 4
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Pace <= 0 {
		cfg.Pace = 5 * time.Millisecond
	}
	r := &RLS{cfg: cfg, conns: map[string]*grpc.ClientConn{}, admitted: map[string]int64{}, byCode: map[codes.Code]int64{}}
	for i := 0; i < cfg.Values; i++ {
		v := fmt.Sprintf("v%d-%d", cfg.Seed, i)
		r.values = append(r.values, v)
		r.keys = append(r.keys, rlsapi.CounterKey(cfg.Domain, []limits.Entry{{Key: cfg.Key, Value: v}}, nil, 0, 1<<10))
	}
	r.SetAddrs(addrs...)
	return r
}

// SetAddrs changes the nodes calls go through.
func (r *RLS) SetAddrs(addrs ...string) {
	a := append([]string(nil), addrs...)
	r.addrs.Store(&a)
}

// Keys are the counters' keys, a value's at its index.
func (r *RLS) Keys() []string { return r.keys }

// Run sends calls until ctx ends.
func (r *RLS) Run(ctx context.Context) {
	paced(ctx, r.cfg.Workers, r.cfg.Pace, func(w int) *rand.Rand { return rand.New(rand.NewPCG(r.cfg.Seed, uint64(w)+1000)) },
		func(rng *rand.Rand) {
			if addrs := *r.addrs.Load(); len(addrs) > 0 {
				r.one(rng.IntN(len(r.values)), addrs[rng.IntN(len(addrs))])
			}
		})
}

func (r *RLS) one(i int, addr string) {
	cl, err := r.client(addr)
	if err != nil {
		r.note(i, nil, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	resp, err := cl.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: r.cfg.Domain, Descriptors: []*commonpb.RateLimitDescriptor{
		{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: r.cfg.Key, Value: r.values[i]}}}}})
	r.note(i, resp, err)
}

// note records one call's outcome.
func (r *RLS) note(i int, resp *rlspb.RateLimitResponse, err error) {
	o := rlsOutcome(err)
	r.log.Incr(r.keys[i], 1, o)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byCode[status.Code(err)]++
	if o == history.OK && resp.GetOverallCode() == rlspb.RateLimitResponse_OK {
		r.admitted[r.values[i]]++
	}
}

// rlsOutcome is what a call's error says of its hit: counted (no error), certainly not
// (the call was refused as bad, or no connection was made), or perhaps.
func rlsOutcome(err error) history.Outcome {
	switch status.Code(err) {
	case codes.OK:
		return history.OK
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied:
		return history.Failed
	}
	return history.Unknown
}

func (r *RLS) client(addr string) (rlspb.RateLimitServiceClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cc := r.conns[addr]
	if cc == nil {
		var err error
		if cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		r.conns[addr] = cc
	}
	return rlspb.NewRateLimitServiceClient(cc), nil
}

// Codes are the calls answered so far, by gRPC code.
func (r *RLS) Codes() map[codes.Code]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[codes.Code]int64, len(r.byCode))
	for c, n := range r.byCode {
		out[c] = n
	}
	return out
}

// Admitted is, per value, the calls answered OK so far.
func (r *RLS) Admitted() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.admitted))
	for v, n := range r.admitted {
		out[v] = n
	}
	return out
}

// Check reads the counters through c (in window, the rule's) and checks them against
// what was answered: the increments within b, and each value's admissions within its
// limit plus b.OverAdmit.
func (r *RLS) Check(ctx context.Context, c Counter, window string, b history.Bounds) (history.Summary, error) {
	counts, err := c.Counts(ctx, r.keys, window)
	if err != nil {
		return history.Summary{}, err
	}
	final := make(map[string]int64, len(r.keys))
	for i, k := range r.keys {
		final[k] = counts[i]
	}
	s := r.log.Check(final, b)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.values {
		if over := r.admitted[v] - r.cfg.Limit; over > 0 {
			s.OverAdmitted += over
			if over > b.OverAdmit {
				s.Violations = append(s.Violations, fmt.Sprintf("%s: %d calls answered OK, past its limit %d (allowed over-admission %d)",
					v, r.admitted[v], r.cfg.Limit, b.OverAdmit))
			}
		}
	}
	return s, nil
}

// Close closes the connections.
func (r *RLS) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cc := range r.conns {
		cc.Close()
	}
	r.conns = map[string]*grpc.ClientConn{}
}
