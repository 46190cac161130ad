package rlqs

import (
	"context"
	"math"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlqs/fairshare"
)

// stream is one StreamRateLimitQuotas call: its Envoy's domain and buckets. Only the
// call's goroutine touches it.
type stream struct {
	s       *Server
	name    string // unique cluster-wide
	domain  string
	buckets map[string]*held
}

// held is one bucket of a stream and what it was last sent.
type held struct {
	id       *rlqspb.BucketId
	reported time.Time // the last report's arrival (zero before the first)
	limited  bool      // it was last sent an assignment of a rule's limit
	tokens   tokenBucket
	sent     time.Time // when tokens was last sent (zero: no token bucket in force)
	credit   float64   // reserved past what its renewals needed so far
	rate     float64   // its demand, smoothed (demand)
}

// report answers one usage report: an action for each bucket whose assignment is sent
// (new, renewed, a blanket rule, or abandoned).
func (st *stream) report(ctx context.Context, rep *rlqspb.RateLimitQuotaUsageReports) (*rlqspb.RateLimitQuotaResponse, error) {
	switch d := rep.GetDomain(); {
	case st.domain == "" && d == "":
		return nil, status.Error(codes.InvalidArgument, "rlqs: the stream's first report names no domain")
	case st.domain == "":
		st.domain = d
	case d != "" && d != st.domain:
		return nil, status.Errorf(codes.InvalidArgument, "rlqs: domain %q on a stream of domain %q: open another stream", d, st.domain)
	}
	ctx, cancel := context.WithTimeout(ctx, st.s.cfg.Timeout)
	defer cancel()
	now := st.s.cfg.Now()
	rules := st.s.cfg.Rules()
	if rules == nil {
		// As ShouldRateLimit: nothing is decided without rules (Envoy applies its
		// no_assignment_behavior meanwhile).
		return nil, status.Error(codes.Unavailable, "rlqs: no rate limit rules are loaded")
	}
	// The buckets are read in order, then decided concurrently (each may wait for
	// its ledger's owner and its share: a report of many buckets would otherwise take
	// as many round trips), then answered in order.
	usages := rep.GetBucketQuotaUsages()
	work := make([]bucketWork, 0, len(usages))
	seen := make(map[*held]bool, len(usages))
	for _, u := range usages {
		entries, err := entriesOf(u.GetBucketId())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, "rlqs: "+err.Error())
		}
		name := bucketName(entries)
		h := st.buckets[name]
		if h == nil {
			if len(st.buckets) >= maxStreamBuckets {
				return nil, status.Errorf(codes.ResourceExhausted, "rlqs: more than %d buckets on one stream", maxStreamBuckets)
			}
			h = &held{id: proto.Clone(u.GetBucketId()).(*rlqspb.BucketId)}
			st.buckets[name] = h
			st.s.metrics.buckets.Inc()
		}
		if seen[h] {
			return nil, status.Errorf(codes.InvalidArgument, "rlqs: bucket %v twice in one report", u.GetBucketId().GetBucket())
		}
		seen[h] = true
		work = append(work, bucketWork{h: h, name: name, entries: entries, rate: h.demand(u, now)})
	}
	sem := make(chan struct{}, reportWorkers)
	var wg sync.WaitGroup
	for i := range work {
		w := &work[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.action = st.decide(ctx, w.h, w.entries, rules, w.rate, now)
		}()
	}
	wg.Wait()
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, w := range work {
		if w.action == nil {
			continue
		}
		resp.BucketAction = append(resp.BucketAction, w.action)
		if w.action.GetAbandonAction() != nil {
			delete(st.buckets, w.name)
			st.s.metrics.buckets.Dec()
		}
	}
	return resp, nil
}

// reportWorkers bounds the buckets of one report decided at once.
const reportWorkers = 16

// bucketWork is one bucket of a report on its way to its action.
type bucketWork struct {
	h       *held
	name    string
	entries []limits.Entry
	rate    float64
	action  *rlqspb.RateLimitQuotaResponse_BucketAction
}

// demand is the rate of requests u reports (allowed and denied), over the time since
// the bucket's last report (or the time the report gives for its first), smoothed:
// each report weighs demandWeight against the rate before it, so that a few requests
// more or less in one interval do not change the bucket sent (each new bucket costs
// a burst), while a shift in demand is followed within a few reports.
func (h *held) demand(u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) float64 {
	since := u.GetTimeElapsed().AsDuration()
	first := h.reported.IsZero()
	if !first {
		since = now.Sub(h.reported)
	}
	h.reported = now
	if since < 100*time.Millisecond {
		since = time.Second // a first report sent at once, without its time: a second's
	}
	rate := (float64(u.GetNumRequestsAllowed()) + float64(u.GetNumRequestsDenied())) / since.Seconds()
	if !first {
		rate = demandWeight*rate + (1-demandWeight)*h.rate
	}
	h.rate = rate
	return rate
}

// demandWeight is a report's weight in a bucket's demand: after three reports the
// demand before a shift weighs 0.4^3, 6%.
const demandWeight = 0.6

// decide is the action for h at now, or nil when it is best sent none (the assignment
// in force stays until its time to live ends).
func (st *stream) decide(ctx context.Context, h *held, entries []limits.Entry, rules *limits.Rules, rate float64, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	rule, shared := rules.Lookup(st.domain, entries)
	switch {
	case rule == nil && h.limited:
		st.s.metrics.assignments.WithLabelValues(kindAbandon).Inc()
		return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: h.id,
			BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}
	case rule == nil || rule.Unlimited || rule.ShadowMode:
		return st.blanket(h, typev3.RateLimitStrategy_ALLOW_ALL)
	}
	ledgers := make([]ledger, 0, len(rule.Limits))
	capacity := math.Inf(1)
	for j, l := range rule.Limits {
		if l.RequestsPerUnit == 0 {
			h.limited = true
			return st.blanket(h, typev3.RateLimitStrategy_DENY_ALL)
		}
		lg, err := ledgerOf(st.domain, entries, shared, j, l, st.s.cfg.DefaultBuckets, st.s.cfg.MaxKeyBytes, st.s.cfg.life())
		if err != nil {
			st.s.cfg.Logger.Warn("rlqs: a limit no counter can hold", "rule", rule.Key, "err", err)
			return st.blanket(h, typev3.RateLimitStrategy_DENY_ALL)
		}
		ledgers = append(ledgers, lg)
		capacity = min(capacity, lg.capacity(st.s.cfg.life()))
	}
	h.limited = true
	// The demand shared by is a little over the reported one, so that an Envoy that
	// gets what it asks for has room for its demand's noise.
	share := st.s.share(ctx, fairshare.Request{Bucket: ledgers[0].key, Stream: st.name, Demand: rate*1.2 + 1, Capacity: capacity})
	return st.tokenBucket(ctx, h, ledgers, share, now)
}

// tokenBucket renews h's token bucket, or sends it a new one of share tokens a second,
// after reserving what it may admit in the ledgers; when neither fits, h keeps the one
// in force, or is denied until its next report if none is.
func (st *stream) tokenBucket(ctx context.Context, h *held, ledgers []ledger, share float64, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	cfg := st.s.cfg
	want, ok := bucketFor(share, cfg.life())
	// A bucket Envoy holds when this renewal reaches it, near what the share asks, is
	// renewed: Envoy keeps its tokens, so only the time added is paid for.
	live := !h.sent.IsZero() && now.Add(cfg.Delivery).Before(h.sent.Add(cfg.TTL))
	if live && ok && (near(want, h.tokens) || envoyKeeps(want, h.tokens)) {
		need := h.tokens.rate()*now.Sub(h.sent).Seconds() - h.credit
		n := int64(math.Ceil(max(need, 0)))
		if reserved, _ := st.reserve(ctx, ledgers, n); n == 0 || reserved {
			h.credit = float64(n) - need
			h.sent = now
			st.s.metrics.assignments.WithLabelValues(kindRenewed).Inc()
			return st.tokenAction(h)
		}
		st.s.metrics.assignments.WithLabelValues(kindWithheld).Inc()
		return nil
	}
	// A live bucket replaced leaves unspent what was paid for its time to come: Envoy
	// drops it for the new one when that arrives, within Delivery. That surplus was
	// paid within the ledger's lengthened window of every admission the new bucket
	// makes, so it pays for the new bucket first (doc.go).
	surplus := 0.0
	if live {
		surplus = h.credit + h.tokens.rate()*h.sent.Add(cfg.TTL).Sub(now).Seconds()
	}
	if ok {
		if b, done := st.buy(ctx, ledgers, want, surplus); done {
			return st.newBucket(h, b, now)
		}
	}
	if live {
		st.s.metrics.assignments.WithLabelValues(kindWithheld).Inc()
		return nil
	}
	return st.blanket(h, typev3.RateLimitStrategy_DENY_ALL)
}

// buy reserves what b may admit over an assignment's life, less surplus; when the
// ledgers refuse, a smaller bucket that what they have left pays for.
func (st *stream) buy(ctx context.Context, ledgers []ledger, b tokenBucket, surplus float64) (tokenBucket, bool) {
	life := st.s.cfg.life()
	cost := func(b tokenBucket) int64 { return int64(math.Ceil(max(b.potential(life)-surplus, 0))) }
	n := cost(b)
	reserved, left := st.reserve(ctx, ledgers, n)
	if n == 0 || reserved {
		return b, true
	}
	smaller, ok := bucketFor((float64(left)+surplus-1)/(life.Seconds()+1), life)
	if !ok || smaller.rate() >= b.rate() {
		return tokenBucket{}, false
	}
	n = cost(smaller)
	if reserved, _ := st.reserve(ctx, ledgers, n); n == 0 || reserved {
		return smaller, true
	}
	return tokenBucket{}, false
}

func (st *stream) newBucket(h *held, b tokenBucket, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	h.tokens, h.sent, h.credit = b, now, 0
	st.s.metrics.assignments.WithLabelValues(kindTokenBucket).Inc()
	return st.tokenAction(h)
}

// reserve adds n to every ledger and reports whether each admitted it; when one did
// not (what the others took stays taken, which errs on the safe side), left is the
// least any had left (0 when one was not decided at all).
func (st *stream) reserve(ctx context.Context, ledgers []ledger, n int64) (ok bool, left int64) {
	ops := make([]counter.Op, len(ledgers))
	for i, lg := range ledgers {
		ops[i] = lg.op(n)
	}
	results := make([]counter.Result, len(ops))
	counter.Do(ctx, st.s.cfg.Decider, ops, results)
	ok, left = true, math.MaxInt64
	for _, r := range results {
		switch {
		case r.Err != nil || r.Undecided != nil:
			// Not decided, or answered by the fail policy: nothing may be sent on it.
			return false, 0
		case r.Allowed:
			st.s.metrics.reserved.Add(float64(n))
		default:
			ok, left = false, min(left, r.Remaining)
		}
	}
	return ok, left
}

// tokenAction is h's token bucket as a bucket action.
func (st *stream) tokenAction(h *held) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return st.assign(h, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     h.tokens.Max,
		TokensPerFill: wrapperspb.UInt32(h.tokens.PerFill),
		FillInterval:  durationpb.New(h.tokens.Fill),
	}}})
}

// blanket is a blanket rule for h; it ends h's token bucket.
func (st *stream) blanket(h *held, rule typev3.RateLimitStrategy_BlanketRule) *rlqspb.RateLimitQuotaResponse_BucketAction {
	h.sent, h.credit = time.Time{}, 0
	kind := kindAllowAll
	if rule == typev3.RateLimitStrategy_DENY_ALL {
		kind = kindDenyAll
	}
	st.s.metrics.assignments.WithLabelValues(kind).Inc()
	return st.assign(h, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}})
}

func (st *stream) assign(h *held, strategy *typev3.RateLimitStrategy) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: h.id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(st.s.cfg.TTL),
			RateLimitStrategy:    strategy,
		}}}
}
