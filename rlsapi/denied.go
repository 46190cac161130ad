package rlsapi

import (
	"context"

	"github.com/leapcount/leapcount/counter"
)

// countAllOrNothing decides ops (one Incr per limit, in checks' order) so that a
// request one limit denies counts in none: it reads every count first and, if one
// limit has no room for its hits, counts nothing; else it admits each with an allow,
// which counts only within the limit. Between the read and the allows another request
// may take the last of a limit: then that limit denies, and the limits before it in
// the request have counted (docs/envoy.md). Shadow-mode limits never deny.
// The results carry, per op, the count its status is judged by.
func (s *Server) countAllOrNothing(ctx context.Context, checks []check, ops []counter.Op) ([]counter.Result, error) {
	limitOf := s.limitsOf(checks, len(ops))
	reads := make([]counter.Op, len(ops))
	for i, op := range ops {
		reads[i] = op
		reads[i].Kind, reads[i].N = counter.Count, 0
	}
	counts, err := s.do(ctx, reads)
	if err != nil {
		return nil, err
	}
	denied := false
	for i, op := range ops {
		if l := limitOf[i]; l.enforced && counts[i].Count+op.N > l.perUnit {
			denied = true
		}
	}
	if denied {
		for i, op := range ops {
			if l := limitOf[i]; l.enforced && counts[i].Count+op.N > l.perUnit {
				counts[i].Count += op.N // judged over: what it would have counted
			}
		}
		return counts, nil
	}
	admits := make([]counter.Op, len(ops))
	for i, op := range ops {
		admits[i] = op
		if limitOf[i].enforced && op.Kind == counter.Incr { // a check only stays a count
			admits[i].Kind, admits[i].Limit = counter.Allow, limitOf[i].perUnit
		}
	}
	results, err := s.do(ctx, admits)
	if err != nil {
		return nil, err
	}
	for i := range results {
		if admits[i].Kind == counter.Allow && !results[i].Allowed {
			results[i].Count = limitOf[i].perUnit + ops[i].N
		}
	}
	return results, nil
}

type opLimit struct {
	perUnit  int64
	enforced bool // not shadow mode
}

// limitsOf is, per op, the limit it counts against.
func (s *Server) limitsOf(checks []check, n int) []opLimit {
	out := make([]opLimit, n)
	for _, c := range checks {
		if c.rule == nil || c.rule.Unlimited {
			continue
		}
		for j, l := range c.rule.Limits {
			out[c.ops+j] = opLimit{perUnit: int64(l.RequestsPerUnit), enforced: !c.rule.ShadowMode}
		}
	}
	return out
}
