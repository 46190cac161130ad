package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/ring"
)

// forwardCall is a batch of ops whose one owner is another member, in flight to it.
type forwardCall struct {
	r   *Router
	ctx context.Context
	rg  *ring.Ring
	to  ring.Member
	b   *counter.Batch
}

// forwardAll sends b's ops to m, their one owner, in the caller's own slices (no plan,
// map or copies), and does not wait: answered ends the call (BenchmarkDoForwarded).
func (r *Router) forwardAll(ctx context.Context, rg *ring.Ring, m ring.Member, b *counter.Batch) {
	c := &forwardCall{r: r, ctx: ctx, rg: rg, to: m, b: b}
	r.forward.Go(ctx, m.RPCAddr, rg.Epoch(), b.Ops, b.Results, c.answered)
}

// answered takes the owner's answer, err for the whole call, on the rpc connection's
// reader, which must never wait: a clean answer ends the call there; ops to route
// again (retry waits for the ring) go on a goroutine.
func (c *forwardCall) answered(err error) {
	if err == nil && len(toRetry(c.b.Ops, c.b.Results)) == 0 {
		c.r.failPolicy(c.b.Ops, c.b.Results)
		c.b.Done()
		return
	}
	go c.finish(err)
}

// finish routes again the ops certainly not decided, applies the fail policy and ends
// the call.
func (c *forwardCall) finish(err error) {
	c.r.forwarded(c.ctx, c.rg, c.to, c.b.Ops, c.b.Results, err)
	c.b.Done()
}

// forwarded finishes ops sent to their one owner m, which answered err for the whole
// call (see remote): the ops certainly not decided are routed again, and the fail
// policy applied.
func (r *Router) forwarded(ctx context.Context, rg *ring.Ring, m ring.Member, ops []counter.Op, results []counter.Result, err error) {
	failForward(m, err, results)
	r.noteNotOwner(m.Name, results)
	if idx := toRetry(ops, results); len(idx) > 0 {
		r.retry(ctx, rg, ops, results, idx)
	}
	r.failPolicy(ops, results)
}

// group is the ops of one owner, with their places in the caller's slices.
type group struct {
	owner   string // the owner's member name
	addr    string // "" for this node
	n       int    // its ops
	idx     []int
	ops     []counter.Op
	results []counter.Result
}

// plan splits ops by owner. Invalid ops and ops with no owner are answered at once.
type plan struct {
	groups  []*group
	results []counter.Result
	retry   []int // ops that may be routed again (Retryable)
	mu      sync.Mutex
}

func (r *Router) plan(rg *ring.Ring, ops []counter.Op, results []counter.Result) *plan {
	// Two passes: each op's group first, then every group's slices cut at their final
	// size from one array each, where appending op by op grows each slice of each group
	// several times (BenchmarkDoForwarded/16-ops-spread).
	p := &plan{results: results}
	of := make([]int, len(ops)) // each op's group; -1: answered here
	var byAddr map[string]int   // past a few groups only: a short list is searched faster
	grouped := 0
	for i := range ops {
		of[i] = -1
		if err := r.limits.Ready(&ops[i]); err != nil {
			results[i] = counter.Result{Err: err}
			continue
		}
		addr, err := r.ownerAddr(rg, &ops[i])
		if err != nil {
			results[i] = counter.Result{Err: err}
			continue
		}
		k, ok := byAddr[addr]
		if byAddr == nil {
			for j, g := range p.groups {
				if g.addr == addr {
					k, ok = j, true
					break
				}
			}
		}
		if !ok {
			m, _ := rg.SlotOwner(ops[i].Slot)
			k = len(p.groups)
			p.groups = append(p.groups, &group{addr: addr, owner: m.Name})
			switch {
			case byAddr != nil:
				byAddr[addr] = k
			case len(p.groups) > 8:
				byAddr = make(map[string]int, 2*len(p.groups))
				for j, g := range p.groups {
					byAddr[g.addr] = j
				}
			}
		}
		of[i] = k
		p.groups[k].n++
		grouped++
	}
	idx := make([]int, grouped)
	gops := make([]counter.Op, grouped)
	gres := make([]counter.Result, grouped)
	off := 0
	for _, g := range p.groups {
		end := off + g.n
		g.idx, g.ops, g.results = idx[off:off:end], gops[off:off:end], gres[off:end:end]
		off = end
	}
	for i, k := range of {
		if k >= 0 {
			g := p.groups[k]
			g.idx = append(g.idx, i)
			g.ops = append(g.ops, ops[i])
		}
	}
	return p
}

// run decides every group, the remote ones concurrently, and scatters the results.
func (p *plan) run(ctx context.Context, r *Router, rg *ring.Ring) {
	if len(p.groups) == 1 && p.groups[0].addr != "" {
		// One owner elsewhere (a single op, typically): no goroutine to start and wait
		// for, which costs a wake-up per op.
		p.remote(ctx, r, rg, p.groups[0])
		return
	}
	var wg sync.WaitGroup
	for _, g := range p.groups {
		if g.addr == "" {
			continue
		}
		wg.Add(1)
		go func(g *group) {
			defer wg.Done()
			p.remote(ctx, r, rg, g)
		}(g)
	}
	for _, g := range p.groups {
		if g.addr == "" {
			counter.Do(ctx, r.local, g.ops, g.results)
			p.scatter(g)
		}
	}
	wg.Wait()
}

// remote forwards a group to its owner. An error for the whole call says the ops were
// never sent (counter.ErrNotSent: routed again), or sent without an answer: their
// outcome is unknown, and they are never decided elsewhere, which could count them
// twice.
func (p *plan) remote(ctx context.Context, r *Router, rg *ring.Ring, g *group) {
	r.forwardTo(ctx, rg, ring.Member{Name: g.owner, RPCAddr: g.addr}, g.ops, g.results)
	r.noteNotOwner(g.owner, g.results)
	p.scatter(g)
}

// forwardTo sends ops to their owner m and fills results (see remote for what an
// error for the whole call means).
func (r *Router) forwardTo(ctx context.Context, rg *ring.Ring, m ring.Member, ops []counter.Op, results []counter.Result) {
	failForward(m, r.forward.Do(ctx, m.RPCAddr, rg.Epoch(), ops, results), results)
}

// failForward sets every result to err, the error for a whole call to m, as the router
// reports it: unsent (routed again), or with its outcome unknown. Nothing when err is
// nil.
func failForward(m ring.Member, err error, results []counter.Result) {
	if err == nil {
		return
	}
	if !errors.Is(err, counter.ErrNotSent) {
		err = fmt.Errorf("%w: owner %s (%s) did not answer: %v", counter.ErrOutcomeUnknown, m.Name, m.RPCAddr, err)
	}
	for k := range results {
		results[k] = counter.Result{Err: err}
	}
}

// scatter copies a group's results to the caller's places, noting the ops that were
// certainly not decided, which may be routed again.
func (p *plan) scatter(g *group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, i := range g.idx {
		if err := g.results[k].Err; Retryable(&g.ops[k], err) {
			p.retry = append(p.retry, i)
		}
		p.results[i] = g.results[k]
	}
}

// retry routes again the ops that may be (idx, see retryable), whenever the ring
// changes or after a short, growing backoff, until they are decided or RetryWait has
// passed; those left then fail: unavailable, or a count with its last outcome unknown.
func (r *Router) retry(ctx context.Context, sent *ring.Ring, ops []counter.Op, results []counter.Result, idx []int) {
	deadline := time.Now().Add(r.RetryWait)
	unborrow(ops, idx)
	retry := backoff.Policy{Initial: 5 * time.Millisecond, Max: 200 * time.Millisecond}
	for wait := retry.Next(0); len(idx) > 0; wait = retry.Next(wait) {
		rg := r.waitChange(ctx, sent, wait, deadline)
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		sub := make([]counter.Op, len(idx))
		subRes := make([]counter.Result, len(idx))
		for k, i := range idx {
			sub[k] = ops[i]
		}
		p := r.plan(rg, sub, subRes)
		p.run(ctx, r, rg)
		for k, i := range idx {
			results[i] = subRes[k]
		}
		next := make([]int, 0, len(p.retry))
		for _, k := range p.retry {
			next = append(next, idx[k])
		}
		idx, sent = next, rg
	}
	for _, i := range idx {
		if err := results[i].Err; !errors.Is(err, counter.ErrOutcomeUnknown) {
			results[i] = counter.Result{Err: fmt.Errorf("%w: ownership of %q is moving (%v); retry", counter.ErrUnavailable, ops[i].Key, err)}
		}
	}
}

// waitChange waits until the ring is no longer sent, or for wait (the other node may
// be the one behind, and catch up without this node's ring changing), or until the
// deadline or ctx; it returns the ring then.
func (r *Router) waitChange(ctx context.Context, sent *ring.Ring, wait time.Duration, deadline time.Time) *ring.Ring {
	ch := r.changed.Load() // before the check, so a change in between is not missed
	if rg := r.ring.Load(); rg != sent {
		return rg
	}
	t := time.NewTimer(min(wait, time.Until(deadline)))
	defer t.Stop()
	select {
	case <-*ch:
	case <-t.C:
	case <-ctx.Done():
	}
	return r.ring.Load()
}

// Retryable reports whether op may be routed again after err: it was certainly not
// decided, or never sent, or it is a count whose answer was lost (asking again changes
// nothing).
func Retryable(op *counter.Op, err error) bool {
	return err != nil && (undecided(err) || errors.Is(err, counter.ErrNotSent) ||
		op.Kind == counter.Count && errors.Is(err, counter.ErrOutcomeUnknown))
}

// noteNotOwner tells Disagrees when member answered any of results "not owner".
func (r *Router) noteNotOwner(member string, results []counter.Result) {
	if r.Disagrees == nil {
		return
	}
	for i := range results {
		if errors.Is(results[i].Err, counter.ErrNotOwner) {
			r.Disagrees(member)
			return
		}
	}
}

// toRetry lists the ops that may be routed again (Retryable).
func toRetry(ops []counter.Op, results []counter.Result) []int {
	var idx []int
	for i := range results {
		if Retryable(&ops[i], results[i].Err) {
			idx = append(idx, i)
		}
	}
	return idx
}

// undecided reports whether an op's error says it was certainly not decided, so that
// it may be sent again: the node was not its owner (or had no lease for it yet), or read
// it after its deadline.
func undecided(err error) bool {
	return errors.Is(err, counter.ErrNotOwner) || errors.Is(err, counter.ErrExpired)
}

// undecidedOps lists the ops whose error says they were certainly not decided.
func undecidedOps(results []counter.Result) []int {
	var idx []int
	for i := range results {
		if undecided(results[i].Err) {
			idx = append(idx, i)
		}
	}
	return idx
}
