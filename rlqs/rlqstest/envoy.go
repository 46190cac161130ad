// Package rlqstest simulates Envoys running the rate_limit_quota HTTP filter against a
// Rate Limit Quota Service: each reports its usage of one bucket over a real gRPC
// stream every reporting interval and enforces the assignments it is sent as Envoy's
// filter does (a token bucket that starts full and refills continuously, kept when an
// assignment sends the same bucket again, by Envoy's own comparison; blanket rules; an
// expired or missing assignment denies, as a filter configured to fail closed). Every
// admission is recorded with its time, so that a test can check what the fleet
// admitted in any window.
package rlqstest

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Admissions records when each Envoy admitted a request.
type Admissions struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

// NewAdmissions is an empty record.
func NewAdmissions() *Admissions { return &Admissions{times: map[string][]time.Time{}} }

func (a *Admissions) add(envoy string, t time.Time) {
	a.mu.Lock()
	a.times[envoy] = append(a.times[envoy], t)
	a.mu.Unlock()
}

// MaxInWindow is the most requests all Envoys admitted within any window of length w,
// and where that window began.
func (a *Admissions) MaxInWindow(w time.Duration) (int, time.Time) {
	a.mu.Lock()
	var all []time.Time
	for _, ts := range a.times {
		all = append(all, ts...)
	}
	a.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	best, at := 0, time.Time{}
	for i, j := 0, 0; j < len(all); j++ {
		for all[j].Sub(all[i]) >= w {
			i++
		}
		if j-i+1 > best {
			best, at = j-i+1, all[i]
		}
	}
	return best, at
}

// Between is how many requests envoy admitted in [from, to).
func (a *Admissions) Between(envoy string, from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, t := range a.times[envoy] {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// Envoy is one simulated Envoy with one bucket.
type Envoy struct {
	Name     string
	Domain   string
	Bucket   map[string]string
	Interval time.Duration // reporting_interval
	Addrs    []string      // RLQS servers, tried in turn whenever a stream ends
	Record   *Admissions
	// StreamFor, when set, ends each stream after that long, and the next opens at
	// once: an Envoy whose streams keep breaking (the server gets a new stream, the
	// Envoy keeps the buckets it holds).
	StreamFor time.Duration

	mu      sync.Mutex
	demand  float64 // requests a second
	owed    float64 // requests due but not yet made
	allowed uint64  // since the last report
	denied  uint64
	action  *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction
	expires time.Time
	tokens  float64
	filled  time.Time
	streams int // streams opened
}

// SetDemand sets the requests a second the Envoy makes.
func (e *Envoy) SetDemand(perSecond float64) {
	e.mu.Lock()
	e.demand = perSecond
	e.mu.Unlock()
}

// Streams is how many streams the Envoy has opened.
func (e *Envoy) Streams() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streams
}

// Run makes requests and reports until ctx ends.
func (e *Envoy) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); e.requests(ctx) }()
	go func() { defer wg.Done(); e.report(ctx) }()
	wg.Wait()
}

// requests makes the demand's requests, every millisecond or two.
func (e *Envoy) requests(ctx context.Context) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			e.mu.Lock()
			e.owed += e.demand * now.Sub(last).Seconds()
			last = now
			for ; e.owed >= 1; e.owed-- {
				if e.admit(now) {
					e.allowed++
					e.Record.add(e.Name, now)
				} else {
					e.denied++
				}
			}
			e.mu.Unlock()
		}
	}
}

// admit decides one request as the filter does; e.mu is held.
func (e *Envoy) admit(now time.Time) bool {
	if e.action == nil || now.After(e.expires) {
		return false // no assignment, or an expired one: this filter fails closed
	}
	s := e.action.GetRateLimitStrategy()
	if tb := s.GetTokenBucket(); tb != nil {
		rate := float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
		e.tokens = math.Min(float64(tb.GetMaxTokens()), e.tokens+rate*now.Sub(e.filled).Seconds())
		e.filled = now
		if e.tokens >= 1 {
			e.tokens--
			return true
		}
		return false
	}
	return s.GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL
}

// report keeps a stream open to one of Addrs in turn and reports on it every Interval.
func (e *Envoy) report(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		e.stream(ctx, e.Addrs[i%len(e.Addrs)])
		if e.StreamFor > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (e *Envoy) stream(ctx context.Context, addr string) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		return
	}
	e.mu.Lock()
	e.streams++
	e.mu.Unlock()
	go e.receive(s, cancel)
	if e.StreamFor > 0 {
		stop := time.AfterFunc(e.StreamFor, cancel)
		defer stop.Stop()
	}
	t := time.NewTicker(e.Interval)
	defer t.Stop()
	last := time.Now()
	for first := true; ; first = false {
		e.mu.Lock()
		now := time.Now()
		u := &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: e.Bucket},
			TimeElapsed: durationpb.New(now.Sub(last).Truncate(time.Second)), NumRequestsAllowed: e.allowed, NumRequestsDenied: e.denied}
		e.allowed, e.denied, last = 0, 0, now
		e.mu.Unlock()
		rep := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{u}}
		if first {
			rep.Domain = e.Domain
		}
		if s.Send(rep) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// receive applies the assignments a stream brings, until it ends.
func (e *Envoy) receive(s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient, cancel func()) {
	defer cancel()
	for {
		resp, err := s.Recv()
		if err != nil {
			return
		}
		now := time.Now()
		for _, a := range resp.GetBucketAction() {
			e.mu.Lock()
			switch {
			case a.GetAbandonAction() != nil:
				e.action = nil
			case a.GetQuotaAssignmentAction() != nil:
				next := a.GetQuotaAssignmentAction()
				if tb := next.GetRateLimitStrategy().GetTokenBucket(); tb != nil && (!sameBucket(e.action, tb) || now.After(e.expires)) {
					// A new bucket, or one after the last expired (Envoy's filter then
					// forgot it), starts full.
					e.tokens, e.filled = float64(tb.GetMaxTokens()), now
				}
				e.action = next
				e.expires = now.Add(next.GetAssignmentTimeToLive().AsDuration())
			}
			e.mu.Unlock()
		}
	}
}

// sameBucket is Envoy's test for keeping a token bucket: max_tokens, tokens_per_fill
// and the nanoseconds of fill_interval (not its seconds) equal.
func sameBucket(cur *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction, tb *typev3.TokenBucket) bool {
	old := cur.GetRateLimitStrategy().GetTokenBucket()
	return old != nil && old.GetMaxTokens() == tb.GetMaxTokens() &&
		old.GetTokensPerFill().GetValue() == tb.GetTokensPerFill().GetValue() &&
		old.GetFillInterval().GetNanos() == tb.GetFillInterval().GetNanos()
}

// Assignment is the assignment in force (nil: none).
func (e *Envoy) Assignment() *rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.action
}
