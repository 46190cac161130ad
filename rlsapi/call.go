package rlsapi

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlsapi/internal/h2grpc"
)

// Room a call carries for its request: Envoy's calls mostly hold one to three
// descriptors of an entry or two each; larger ones take allocations of their own.
const (
	callDescriptors = 3
	callEntries     = 6
	callOps         = 3
)

// rlsCall is one ShouldRateLimit call on h2grpc's path, from its request to its answer.
// What it needs on the way is allocated with it, in one piece, and its steps are
// methods rather than closures: a dozen allocations a call fewer
// (BenchmarkShouldRateLimit).
type rlsCall struct {
	s       *Server
	c       *h2grpc.Call
	reply   func([]byte, error)
	started time.Time // for the call's duration metric
	now     time.Time // the wall clock its answer's resets are measured from
	cancel  context.CancelFunc
	req     request
	d       decision
	batch   counter.Batch

	descriptors [callDescriptors]descriptor
	entries     [callEntries]limits.Entry
	checks      [callDescriptors]check
	ops         [callOps]counter.Op
	results     [callOps]counter.Result
	answer      answerRoom
}

// shouldRateLimitCall is ShouldRateLimit on h2grpc's call path, what grpc.Server and
// the interceptors do for it (the token, the call's metrics) without them, and without
// waiting: a call whose descriptors this node decides at once is answered on the
// connection's reader, one with descriptors elsewhere when their owners answer, on the
// goroutine that brings the last answer. A goroutine per call, woken when its forwards
// are answered, costs a wake-up per call.
func (s *Server) shouldRateLimitCall(ctx context.Context, c *h2grpc.Call, reply func([]byte, error)) {
	cl := &rlsCall{s: s, c: c, reply: reply, started: time.Now()}
	cl.req.descriptors, cl.req.room = cl.descriptors[:0], cl.entries[:0]
	cl.d.checks, cl.d.ops = cl.checks[:0], cl.ops[:0]
	// Its token was checked as its headers came (authorizeCall).
	if err := decodeRequest(c.Message, &cl.req, s.cfg.MaxDescriptors); err != nil {
		cl.end(nil, decodeError(err))
		return
	}
	rules, err := s.rulesFor(&cl.req)
	if err == nil {
		err = s.prepare(&cl.req, rules, &cl.d)
	}
	if err != nil {
		cl.end(nil, err)
		return
	}
	ctx, cl.cancel = s.callContext(ctx)
	cl.now = s.cfg.Now()
	if cl.d.allOrNothing {
		// Two rounds, the second chosen by the first: rare enough to wait for.
		go cl.countAllOrNothing(ctx)
		return
	}
	cl.start(ctx)
}

// start decides the call's ops without waiting; finish gets their results at once or
// from the goroutine that brings the last of them.
func (cl *rlsCall) start(ctx context.Context) {
	ops := cl.d.ops
	results := cl.results[:0]
	if cap(results) < len(ops) {
		results = make([]counter.Result, 0, len(ops))
	}
	results = results[:len(ops)]
	if len(ops) == 0 {
		cl.finish(results, nil)
		return
	}
	cl.batch = counter.Batch{Ops: ops, Results: results, Done: cl.decided}
	if cl.s.cfg.Decider.Decide(ctx, &cl.batch) {
		cl.decided()
	}
}

// decided is the batch's Done.
func (cl *rlsCall) decided() {
	cl.finish(cl.s.decided(cl.batch.Results))
}

func (cl *rlsCall) countAllOrNothing(ctx context.Context) {
	cl.finish(cl.s.countAllOrNothing(ctx, cl.d.checks, cl.d.ops))
}

// finish answers the call from its ops' results, or with err.
func (cl *rlsCall) finish(results []counter.Result, err error) {
	cl.cancel()
	if err != nil {
		cl.end(nil, err)
		return
	}
	resp := cl.s.answer(cl.req.domain, cl.d.checks, cl.d.ops, results, cl.now, &cl.answer)
	cl.end(appendResponse(cl.c.Out, resp))
}

// end notes the call's metrics and replies.
func (cl *rlsCall) end(out []byte, err error) {
	mm := cl.s.metrics.method(shouldRateLimitMethod)
	mm.duration.Observe(time.Since(cl.started).Seconds())
	cl.s.metrics.code(mm, status.Code(err)).Inc()
	cl.reply(out, err)
}
