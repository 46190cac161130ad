package route

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// Forwarder sends ops to their owner, the node at addr, marked as forwarded (the owner
// never forwards them again) under the sender's ring epoch, and fills results (in
// production: internal/peerrpc's Forwarder, over node's rpc client). Do waits for the
// answer; Go does not wait, and hands the outcome to done: from another goroutine (the
// rpc connection's reader, or a timer at the deadline), or from the caller's own before
// Go returns when the call fails at once (never sent). An error is for the whole call:
// one wrapping counter.ErrNotSent says the ops were certainly never sent (they may be
// routed again); any other says their outcome is unknown.
type Forwarder interface {
	Do(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result) error
	Go(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result, done func(error))
}

// Router decides ops on their owners (a counter.Decider). It is safe for concurrent use.
type Router struct {
	self    string          // this node's member name
	local   counter.Decider // decides ops this node owns
	forward Forwarder
	limits  counter.Limits
	ring    atomic.Pointer[ring.Ring]
	changed atomic.Pointer[chan struct{}] // closed and replaced by every SetRing
	calls   sync.Pool                     // *localCall, reused: the local path allocates nothing
	admits  atomic.Uint32                 // an Admission: whether Decide takes client ops now

	failedOpen, failedClosed atomic.Uint64 // allow ops answered by the fail policy (FailPolicyAnswers)

	// RetryWait bounds how long ops that were certainly not decided (answered "not
	// owner", or whose owner could not be dialed) wait for this node's ring to change
	// before they fail. Membership changes settle within it, so clients see no errors.
	RetryWait time.Duration

	// FailOpen is how allow answers when its owner cannot decide it, or its outcome is
	// unknown: allowed (true) or denied (false, the default), marked as the policy's
	// answer (counter.Result.Undecided). Other ops fail.
	FailOpen bool

	// Forwarded, when set, decides the ops peers forward here (HandleAsync, from an rpc
	// connection's reader) instead of the local Decider.
	Forwarded counter.Decider

	// Slices, when set, turns limit slices on (slices.go).
	Slices *SliceConfig

	// Disagrees, when set, is told the name of a member that answered ops "not owner":
	// its ring and this node's may differ, and the ops wait (retry) until this node's
	// ring changes. It must not block (it may run on an rpc connection's reader).
	Disagrees func(member string)
}

// DefaultRetryWait is Router.RetryWait unless changed.
const DefaultRetryWait = 2 * time.Second

// New returns a router for the member named self. Until SetRing is called it owns
// nothing and answers ErrUnavailable.
func New(self string, local counter.Decider, forward Forwarder, limits counter.Limits) *Router {
	r := &Router{self: self, local: local, forward: forward, limits: limits, RetryWait: DefaultRetryWait}
	r.calls.New = func() any { return newLocalCall(r) }
	ch := make(chan struct{})
	r.changed.Store(&ch)
	return r
}

// SetRing installs the ring that decides owners from now on.
func (r *Router) SetRing(rg *ring.Ring) {
	r.ring.Store(rg)
	ch := make(chan struct{})
	close(*r.changed.Swap(&ch))
}

// Ring is the ring in use (nil before SetRing).
func (r *Router) Ring() *ring.Ring { return r.ring.Load() }

// Admission is whether the router takes client ops (Decide), as its node says
// (SetAdmission): forwarded ops (HandleAsync) are the cluster's, and always taken.
type Admission uint32

const (
	// Admitting takes client ops: the default, and a node's once it has joined.
	Admitting Admission = iota
	// Joining answers counter.ErrUnavailable: the node's ring may not know the other
	// owners yet.
	Joining
	// Stopping answers counter.ErrShuttingDown, for good: a stopping node decides
	// nothing new.
	Stopping
)

// SetAdmission sets whether Decide takes client ops. Stopping is final.
func (r *Router) SetAdmission(a Admission) {
	for {
		old := r.admits.Load()
		if Admission(old) == Stopping || r.admits.CompareAndSwap(old, uint32(a)) {
			return
		}
	}
}

// refused answers every op of b when the router takes no client op now, and reports
// whether it did.
func (r *Router) refused(b *counter.Batch) bool {
	var err error
	switch Admission(r.admits.Load()) {
	case Admitting:
		return false
	case Joining:
		err = fmt.Errorf("%w: node is joining the cluster", counter.ErrUnavailable)
	default:
		err = counter.ErrShuttingDown
	}
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: err}
	}
	return true
}

// Decide decides each client op on its owner (see counter.Decider). Ops this node owns
// go to the local Decider (decideLocal), at once when it can; ops of one other owner
// are forwarded without waiting (forwardAll); ops of several owners are split by owner
// without waiting (startSpread). Ops are checked here when no front end checked them.
// While the node joins or stops it answers why not (SetAdmission), at once.
func (r *Router) Decide(ctx context.Context, b *counter.Batch) bool {
	if r.refused(b) {
		return true
	}
	for i := range b.Ops {
		_ = r.limits.Ready(&b.Ops[i]) // an invalid op stays unchecked: answered, never sent
	}
	rg := r.ring.Load()
	rest, sliced := r.useSlices(rg, b)
	switch {
	case rest == nil:
		return true // every op decided from a slice
	case sliced != nil && r.route(ctx, rg, rest):
		sliced.settle()
		return true
	case sliced != nil:
		return false // rest's Done settles and ends b
	}
	return r.route(ctx, rg, b)
}

// route decides b's ops, checked, on their owners in rg (see Decide).
func (r *Router) route(ctx context.Context, rg *ring.Ring, b *counter.Batch) bool {
	if r.allLocal(rg, b.Ops) {
		return r.decideLocal(ctx, rg, b)
	}
	if m, ok := r.oneRemote(rg, b.Ops); ok {
		r.forwardAll(ctx, rg, m, b)
		return false
	}
	return r.startSpread(ctx, rg, b)
}

// allLocal reports whether this node owns every op's key (invalid ops count as local:
// the local Decider answers them).
func (r *Router) allLocal(rg *ring.Ring, ops []counter.Op) bool {
	if rg == nil {
		return false
	}
	for i := range ops {
		if !ops[i].Checked() {
			continue
		}
		if m, ok := rg.SlotOwner(ops[i].Slot); !ok || m.Name != r.self {
			return false
		}
	}
	return true
}

// oneRemote returns the one other member that owns every op, when there is one and
// every op is valid (startSpread answers invalid ops itself, unsent).
func (r *Router) oneRemote(rg *ring.Ring, ops []counter.Op) (ring.Member, bool) {
	if rg == nil || len(ops) == 0 {
		return ring.Member{}, false
	}
	var owner ring.Member
	for i := range ops {
		if !ops[i].Checked() {
			return ring.Member{}, false
		}
		m, ok := rg.SlotOwner(ops[i].Slot)
		if !ok || m.Name == r.self || i > 0 && m.Name != owner.Name {
			return ring.Member{}, false
		}
		owner = m
	}
	return owner, true
}

// ownerAddr is the rpc address of a checked op's owner, or "" when this node owns it.
func (r *Router) ownerAddr(rg *ring.Ring, op *counter.Op) (string, error) {
	if rg == nil {
		return "", fmt.Errorf("%w: this node has not joined a cluster yet", counter.ErrUnavailable)
	}
	m, ok := rg.SlotOwner(op.Slot)
	if !ok {
		return "", fmt.Errorf("%w: no owner: %v", counter.ErrUnavailable, rg.Err())
	}
	if m.Name == r.self {
		return "", nil
	}
	return m.RPCAddr, nil
}
