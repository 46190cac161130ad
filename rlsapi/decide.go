package rlsapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/limits"
)

// check is one descriptor of a request on its way to an answer.
type check struct {
	entries []limits.Entry
	rule    *limits.Rule
	shared  []string
	hits    int64
	ops     int    // index of its first op; it has len(rule.Limits)
	metric  string // value_to_metric's stats name (rule.ValueToMetric), else ""
}

// decision is a request on its way to its answer: its descriptors' checks and the ops
// that count them.
type decision struct {
	checks       []check
	ops          []counter.Op
	allOrNothing bool // denied_consumes_nothing: counted by countAllOrNothing
}

// decide answers req from rules, counting with the Decider at now (wall clock), and
// waits for the counts.
func (s *Server) decide(ctx context.Context, req *request, rules *limits.Rules, now time.Time) (*rlspb.RateLimitResponse, error) {
	var d decision
	if err := s.prepare(req, rules, &d); err != nil {
		return nil, err
	}
	var results []counter.Result
	var err error
	if d.allOrNothing {
		results, err = s.countAllOrNothing(ctx, d.checks, d.ops)
	} else {
		results, err = s.do(ctx, d.ops)
	}
	if err != nil {
		return nil, err
	}
	return s.answer(req.domain, d.checks, d.ops, results, now, nil), nil
}

// prepare matches req's descriptors with rules and makes the ops that count them, into
// into, whose checks and ops take them when their capacity does.
func (s *Server) prepare(req *request, rules *limits.Rules, into *decision) error {
	if err := s.validate(req); err != nil {
		return err
	}
	checks := into.checks[:0]
	if cap(checks) < len(req.descriptors) {
		checks = make([]check, 0, len(req.descriptors))
	}
	checks = checks[:len(req.descriptors)]
	clear(checks)
	var replaced map[string]bool
	for i := range req.descriptors {
		d := &req.descriptors[i]
		c := &checks[i]
		c.hits = hitsOf(req, d)
		c.entries = d.entries
		c.rule, c.shared = s.ruleOf(req.domain, c.entries, d, rules)
		if c.rule != nil && c.rule.ValueToMetric && !c.rule.DetailedMetric {
			c.metric = rules.MetricKey(req.domain, c.entries)
		}
		if c.rule != nil {
			for _, name := range c.rule.Replaces {
				if replaced == nil {
					replaced = map[string]bool{}
				}
				replaced[name] = true
			}
		}
	}
	n := 0
	for i := range checks {
		c := &checks[i]
		if c.rule != nil && !c.rule.Unlimited && len(c.rule.Limits) > 0 && c.rule.Limits[0].Name != "" && replaced[c.rule.Limits[0].Name] {
			c.rule = nil // replaced by another descriptor's rule (replaces)
		}
		if c.rule != nil && !c.rule.Unlimited {
			n += len(c.rule.Limits)
		}
	}
	ops := into.ops[:0]
	if cap(ops) < n {
		ops = make([]counter.Op, 0, n) // one allocation (BenchmarkDecide)
	}
	for i := range checks {
		c := &checks[i]
		if c.rule == nil || c.rule.Unlimited {
			continue
		}
		c.ops = len(ops)
		kind := counter.Incr
		if c.hits == 0 {
			kind = counter.Count // check only: judged by the count as it is
		}
		for j, l := range c.rule.Limits {
			op := counter.Op{Kind: kind, Key: CounterKey(req.domain, c.entries, c.shared, j, s.maxKey()),
				Window: l.Window.Milliseconds(), Buckets: s.bucketsOf(l), N: c.hits}
			if kind == counter.Incr {
				op.Limit = int64(l.RequestsPerUnit) // what its count is judged by: a node with --slices may decide it from a slice
			}
			ops = append(ops, op)
		}
	}
	all := s.cfg.DeniedConsumesNothing || rules != nil && rules.DeniedConsumesNothing(req.domain)
	*into = decision{checks: checks, ops: ops, allOrNothing: all}
	return nil
}

// do decides ops and waits for them; an op not decided makes the call's error.
func (s *Server) do(ctx context.Context, ops []counter.Op) ([]counter.Result, error) {
	results := make([]counter.Result, len(ops))
	if len(ops) > 0 {
		counter.Do(ctx, s.cfg.Decider, ops, results)
	}
	return s.decided(results)
}

// decided returns results, or the call's error when an op was not decided.
func (s *Server) decided(results []counter.Result) ([]counter.Result, error) {
	for i := range results {
		err := results[i].Err
		if err == nil {
			// An allow answered by the router's fail policy (--fail-open) is not a
			// decision: Envoy applies its own failure_mode_deny instead.
			err = results[i].Undecided
		}
		if err != nil {
			s.undecided.Add(1)
			s.opErrs.Note(err)
			return nil, status.Errorf(undecidedCode(err), "rate limit not decided: %v", err)
		}
	}
	return results, nil
}

// undecidedCode is the gRPC code of an op that was not decided: bad input is the
// client's to fix; everything else is UNAVAILABLE, which Envoy answers with its
// failure_mode_deny.
func undecidedCode(err error) codes.Code {
	if errors.Is(err, counter.ErrKeyTooLong) || errors.Is(err, counter.ErrBadN) {
		return codes.InvalidArgument
	}
	return codes.Unavailable
}

func (s *Server) validate(req *request) error {
	switch {
	case req.domain == "":
		return status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.descriptors) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.descriptors) > s.cfg.MaxDescriptors:
		return status.Error(codes.InvalidArgument, (&tooManyDescriptors{len(req.descriptors), s.cfg.MaxDescriptors}).Error())
	}
	for i := range req.descriptors {
		d := &req.descriptors[i]
		switch {
		case d.isNegativeHits:
			return status.Error(codes.InvalidArgument, "is_negative_hits is not supported")
		case len(d.entries) == 0:
			return status.Error(codes.InvalidArgument, "a descriptor has no entries")
		case d.hasLimit && (d.limit.unit == 0 || limits.Unit(d.limit.unit).Duration() == 0):
			return status.Errorf(codes.InvalidArgument, "descriptor limit override: unit %v is not one of SECOND to WEEK", typev3.RateLimitUnit(d.limit.unit))
		}
	}
	return nil
}

// hitsOf is what the descriptor adds, as envoyproxy/ratelimit takes it: its own
// hits_addend when sent (0 then checks without counting), else the request's, where 0
// or unset means 1. Past what one counter op adds (counter.MaxN) it is that much: over
// any limit a rule can have below it, rather than a call refused.
func hitsOf(req *request, d *descriptor) int64 {
	if d.hitsSet {
		return int64(min(d.hits, counter.MaxN))
	}
	if req.hitsAddend > 0 {
		return min(int64(req.hitsAddend), counter.MaxN)
	}
	return 1
}

// ruleOf is the rule of descriptor d: its limit override, as envoyproxy/ratelimit takes
// it (no shadow mode, no name), else the configured rule it matches (nil: none).
func (s *Server) ruleOf(domain string, entries []limits.Entry, d *descriptor, rules *limits.Rules) (*limits.Rule, []string) {
	if d.hasLimit {
		u := limits.Unit(d.limit.unit)
		return &limits.Rule{Limits: []limits.Limit{{RequestsPerUnit: d.limit.requestsPerUnit, Unit: u, Window: u.Duration()}}}, nil
	}
	if rules == nil {
		return nil, nil
	}
	return rules.Lookup(domain, entries)
}

// bucketsOf is a limit's buckets: as configured, else DefaultBuckets where they divide
// its window evenly, else one per second of it, else 1.
func (s *Server) bucketsOf(l limits.Limit) int {
	if l.Buckets > 0 {
		return l.Buckets
	}
	w := l.Window.Milliseconds()
	if b := s.cfg.DefaultBuckets; w%int64(b) == 0 {
		return b
	}
	if w%1000 == 0 && w/1000 <= counter.MaxBuckets {
		return int(w / 1000)
	}
	return 1
}

// answer builds the response from the counts, in room when it is large enough.
func (s *Server) answer(domain string, checks []check, ops []counter.Op, results []counter.Result, now time.Time, room *answerRoom) *rlspb.RateLimitResponse {
	resp, a := room.take(len(checks))
	var closest *rlspb.RateLimitResponse_DescriptorStatus
	over, quota, quotaOver := 0, 0, 0
	for i, c := range checks {
		st := &a.statuses[i]
		st.Code = rlspb.RateLimitResponse_OK
		resp.Statuses[i] = st
		switch {
		case c.rule == nil:
			continue
		case c.rule.Unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		}
		s.statusOf(st, &a.limits[i], &a.resets[i], c, ops, results, now)
		s.metrics.note(domain, &checks[i], st)
		if st.Code == rlspb.RateLimitResponse_OVER_LIMIT && c.rule.ShadowMode {
			st.Code = rlspb.RateLimitResponse_OK
		}
		if c.rule.QuotaMode {
			quota++
			if st.Code == rlspb.RateLimitResponse_OVER_LIMIT {
				quotaOver++
			}
		} else if st.Code == rlspb.RateLimitResponse_OVER_LIMIT {
			over++
		}
		if closest == nil || st.LimitRemaining < closest.LimitRemaining || st.Code == rlspb.RateLimitResponse_OVER_LIMIT && closest.Code != st.Code {
			closest = st
		}
	}
	if over > 0 || quota > 0 && quota == quotaOver {
		resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
	}
	if s.cfg.ResponseHeaders && closest != nil {
		resp.ResponseHeadersToAdd = []*corepb.HeaderValue{
			{Key: "RateLimit-Limit", Value: strconv.FormatUint(uint64(closest.CurrentLimit.RequestsPerUnit), 10)},
			{Key: "RateLimit-Remaining", Value: strconv.FormatUint(uint64(closest.LimitRemaining), 10)},
			{Key: "RateLimit-Reset", Value: strconv.FormatInt(closest.DurationUntilReset.GetSeconds(), 10)},
		}
	}
	return resp
}

// statusOf fills st from the counts of c's limits: the first limit over, else the one
// with the least remaining.
func (s *Server) statusOf(st *rlspb.RateLimitResponse_DescriptorStatus, limit *rlspb.RateLimitResponse_RateLimit, reset *durationpb.Duration,
	c check, ops []counter.Op, results []counter.Result, now time.Time) {
	first := true
	for j, l := range c.rule.Limits {
		count := results[c.ops+j].Count
		remaining := int64(l.RequestsPerUnit) - count
		code := rlspb.RateLimitResponse_OK
		if remaining < 0 {
			code, remaining = rlspb.RateLimitResponse_OVER_LIMIT, 0
		}
		if !first && !(code == rlspb.RateLimitResponse_OVER_LIMIT && st.Code == rlspb.RateLimitResponse_OK ||
			code == st.Code && uint32(remaining) < st.LimitRemaining) {
			continue
		}
		first = false
		op := ops[c.ops+j]
		st.Code = code
		st.LimitRemaining = uint32(remaining)
		limit.Name, limit.RequestsPerUnit, limit.Unit = l.Name, l.RequestsPerUnit, rlspb.RateLimitResponse_RateLimit_Unit(l.Unit)
		st.CurrentLimit = limit
		reset.Seconds = untilReset(op.Window, op.Buckets, now)
		st.DurationUntilReset = reset
	}
}

// statusArena holds the parts of a response's statuses.
type statusArena struct {
	statuses []rlspb.RateLimitResponse_DescriptorStatus
	limits   []rlspb.RateLimitResponse_RateLimit
	resets   []durationpb.Duration
}

func newStatusArena(n int) statusArena {
	return statusArena{statuses: make([]rlspb.RateLimitResponse_DescriptorStatus, n),
		limits: make([]rlspb.RateLimitResponse_RateLimit, n), resets: make([]durationpb.Duration, n)}
}

// answerRoom is a response of up to callDescriptors statuses, with their parts, kept
// in its call (rlsCall) rather than allocated a part at a time.
type answerRoom struct {
	resp     rlspb.RateLimitResponse
	statuses [callDescriptors]*rlspb.RateLimitResponse_DescriptorStatus
	status   [callDescriptors]rlspb.RateLimitResponse_DescriptorStatus
	limits   [callDescriptors]rlspb.RateLimitResponse_RateLimit
	resets   [callDescriptors]durationpb.Duration
}

// take returns an empty response of n statuses and their parts: room's when it is
// large enough (r may be nil), else new. The statuses and their parts are allocated
// together, a slice each: fewer allocations for the collector to sweep (BenchmarkDecide).
func (r *answerRoom) take(n int) (*rlspb.RateLimitResponse, statusArena) {
	if r == nil || n > callDescriptors {
		resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, n)}
		return resp, newStatusArena(n)
	}
	r.resp.OverallCode, r.resp.Statuses = rlspb.RateLimitResponse_OK, r.statuses[:n]
	return &r.resp, statusArena{statuses: r.status[:n], limits: r.limits[:n], resets: r.resets[:n]}
}

// untilReset is how long until the window next moves on: the end of the current
// bucket (with one bucket, the epoch-aligned window's end, as envoyproxy/ratelimit
// answers), whole seconds as there, at least 1.
func untilReset(windowMs int64, buckets int, now time.Time) int64 {
	bucketMs := windowMs / int64(buckets)
	ms := now.UnixMilli()
	left := bucketMs - ms%bucketMs
	return max(1, (left+999)/1000)
}

// errNoConfig answers requests while no rules are loaded.
var errNoConfig = fmt.Errorf("no rate limit configuration loaded")

// Check reports the first rule of rules whose limits the counters cannot keep (a window
// over counter.MaxWindowMs, or one its buckets do not divide evenly), or that would
// not slide though the defaults say windows slide (a window that neither the default
// buckets nor whole seconds divide, and that names no buckets), naming its file and
// line; defaultBuckets is Config.DefaultBuckets (0: counter.DefaultBuckets).
func Check(rules *limits.Rules, defaultBuckets int) error {
	s := &Server{cfg: Config{DefaultBuckets: defaultBuckets}.withDefaults()}
	var first error
	rules.Each(func(r *limits.Rule) {
		for _, l := range r.Limits {
			err := counter.ValidateSpec(l.Window.Milliseconds(), s.bucketsOf(l))
			if err == nil && l.Buckets == 0 && s.cfg.DefaultBuckets > 1 && s.bucketsOf(l) == 1 {
				err = fmt.Errorf("window %v: neither %d buckets nor whole seconds divide it, so it could not slide; "+
					"give buckets (1 for a fixed window) or a window they divide", l.Window, s.cfg.DefaultBuckets)
			}
			if err != nil && first == nil {
				first = &limits.Error{File: r.File, Line: r.Line, Msg: fmt.Sprintf("rule %s: %v", r.Key, err)}
			}
		}
	})
	return first
}
