package sim

import (
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/ring"
)

// node is one run of a node: the real lease keeper, owner and store, on the
// simulation's clock and network. Its membership (gossip) is modelled (member.go).
type node struct {
	w    *world
	idx  int
	name string
	inc  uint64 // this run; 0: never started

	up          bool
	leaving     bool
	graceful    bool // stopped by leaving, not by a crash
	pausedUntil time.Duration
	redisCut    time.Duration // until when it cannot reach Redis (its way there is cut)
	redisFlaky  time.Duration // until when half its requests to Redis or their replies are lost

	// Its clocks: monotonic time runs at rate (within the 1% the leases allow), from
	// monoAt at startAt; the counters' wall clock is the world's epoch plus offset.
	rate    float64
	startAt time.Duration
	offset  time.Duration

	store  *leaparray.Store
	keeper *lease.Keeper
	owner  *owner.Owner
	redis  *redisClient
	// borrower holds this run's limit slices (slices.go).
	borrower *borrow.Borrower
	ring     *ring.Ring
	inRing   []string
	retry    *event // the round lease.Keeper.RetryIn asked for, while pending

	view  map[string]*memberView // what its gossip says of every member it has heard of
	seeds int                    // members its --join lists (every node known at its start)

	// For telling late writes (world.noteWrite): when each partition's lease last
	// lapsed here, and when Redis applied this node's two last deltas of each key.
	lapsedAt map[int]time.Duration
	applied  map[string]appliedAt

	// handedIn: partitions whose counters were handed to this run (by whom: node →
	// its run), and whose lease it has not held since (world.unclaimedCounts).
	handedIn map[int]map[*node]uint64

	// apartUntil is when the last pause or cut of this node ends (ended): counts split
	// between it and another node are legitimate only around such a fault (splitCounts).
	apartUntil time.Duration
}

// mono is the node's monotonic clock.
func (n *node) mono() time.Duration {
	return time.Duration(float64(n.w.sched.now-n.startAt) * n.rate)
}

// wall is the node's wall clock, ms since the Unix epoch.
func (n *node) wall() int64 {
	return n.w.epochMs + int64(n.w.sched.now+n.offset)/int64(time.Millisecond)
}

// simDur converts a span of the node's clock to simulated time, rounded up: a timer
// set for d on the node's clock must find at least d gone when it fires.
func (n *node) simDur(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d)/n.rate)) + 1
}

// clock is the node's Clock (internal/clock): its monotonic time and the scheduler's
// timers. Each run gives the same one to its keeper and its owner.
type clock struct{ n *node }

func (c clock) Since() time.Duration { return c.n.mono() }

func (c clock) AfterFunc(d time.Duration, f func()) func() bool {
	e := c.n.w.sched.after(c.n.simDur(d), c.n, f)
	return func() bool {
		was := !e.cancel
		e.cancel = true
		return was
	}
}

// start begins a new run of the node: empty memory, a new incarnation, joining the
// cluster (or founding it, for the first node of the world).
func (n *node) start(found bool) {
	w := n.w
	n.inc = w.nextInc()
	n.up, n.leaving, n.graceful, n.pausedUntil = true, false, false, 0
	n.startAt = w.sched.now
	n.ring, n.inRing, n.retry = nil, nil, nil
	n.handedIn = map[int]map[*node]uint64{}
	n.view = map[string]*memberView{}
	n.seeds = len(w.nodes)
	var opts []leaparray.Option
	if w.opt.Redis {
		opts = append(opts, leaparray.WithDeltas())
	}
	n.store = leaparray.NewStore(opts...)
	mono := clock{n}
	n.keeper = lease.NewKeeper(lease.KeeperConfig{Config: w.leaseCfg, Self: n.name, Incarnation: n.inc,
		Partitions: w.opt.Partitions, Found: found, Clock: mono, Wall: n.wall,
		OnLapse: func(s lease.Set) {
			w.lapsed(n, s)
			n.owner.Lapsed(s)
		},
		OnChange: func() { n.owner.LeasesChanged() }})
	var rc owner.Redis
	if w.opt.Redis {
		n.redis = &redisClient{srv: w.redis, n: n}
		rc = n.redis
	}
	inc := n.inc
	n.owner = owner.New(owner.Config{Self: n.name, Incarnation: inc, Writer: owner.WriterName(n.name, inc), Store: n.store,
		Redis: rc, Peers: peers{n}, Leases: n.keeper, Clock: mono, Now: n.wall,
		ID: func() uint64 { return inc << 32 }, FlushInterval: flushInterval, FlushBatch: w.opt.FlushBatch, HandoffWait: handoffWait,
		OnAmbiguous: func(h *owner.Handoff, delivered bool) { w.ambiguous(h, delivered) },
		Leaving:     n.seesLeaving,
		Logger:      slog.New(traceHandler{n: n})})
	w.trace("%s starts (run %d)%s", n.name, n.inc, map[bool]string{true: ", founding the cluster"}[found])
	n.every(w.leaseCfg.Heartbeat, n.heartbeat)
	n.every(flushInterval, n.owner.Tick)
	n.borrower = n.newBorrower()
	n.every(sliceTick, n.giveBack)
	n.w.sched.after(0, n, n.heartbeat)
}

// every runs f every d of the node's clock while this run lives.
func (n *node) every(d time.Duration, f func()) {
	var tick func()
	tick = func() {
		f()
		n.w.sched.after(n.simDur(d), n, tick)
	}
	n.w.sched.after(n.simDur(d), n, tick)
}

// heartbeat sends a lease round to every peer the keeper names; each answer comes back
// within a heartbeat, or not at all (as the keeper's exchange gives up).
func (n *node) heartbeat() {
	req, targets := n.keeper.Begin()
	n.scheduleRetry()
	sent := n.w.sched.now
	for _, p := range targets {
		to := n.w.byName(p.Addr)
		if to == nil {
			continue
		}
		n.w.net.send(n, to, func() {
			rep := to.keeper.Handle(req)
			n.w.net.send(to, n, func() {
				if n.w.sched.now-sent <= n.simDur(n.w.leaseCfg.Heartbeat) && rep.Round == req.Round {
					n.keeper.Absorb(to.name, req, rep)
				}
			})
		})
	}
}

// scheduleRetry sends a round when a claim blocked by another holder's grant can be
// granted, as lease.Keeper.Run does: one at a time.
func (n *node) scheduleRetry() {
	d, ok := n.keeper.RetryIn(n.mono())
	if !ok || n.retry != nil {
		return
	}
	n.retry = n.w.sched.after(n.simDur(d), n, func() {
		n.retry = nil
		n.heartbeat()
	})
}

// crash ends the run at once: memory and everything in flight to it are gone.
func (n *node) crash() {
	n.up = false
	n.w.trace("%s crashes", n.name)
}

// syncMembership tells the keeper what gossip says, and rebuilds the ring from the
// members that serve (node/membership.go does the same with real gossip).
func (n *node) syncMembership() {
	view := lease.View{DeadSince: map[string]time.Duration{}, LeftRuns: map[string]uint64{}, Runs: map[string]uint64{}}
	var peers []lease.Peer
	for _, name := range sortedViewNames(n.view) {
		m := n.view[name]
		switch m.state {
		case alive, leaving:
			view.Alive = append(view.Alive, name)
			view.Runs[name] = m.run
			if m.state == leaving {
				view.Leaving = append(view.Leaving, name)
			}
			peers = append(peers, lease.Peer{Name: name, Addr: name})
		case left:
			view.Left = append(view.Left, name)
			view.LeftRuns[name] = m.run
		case dead:
			view.DeadSince[name] = n.mono() - n.simToMono(n.w.sched.now-m.since)
		}
	}
	n.keeper.SetView(view, peers)
	n.rebuildRing()
}

// silent reports whether the member named name has gone silent (lease.Keeper.Silent),
// counting from when this node's view of it last changed (node.silent does the same).
func (n *node) silent(name string, now time.Duration) bool {
	var since time.Duration
	if m := n.view[name]; m != nil {
		since = now - n.simToMono(n.w.sched.now-m.since)
	}
	return n.keeper.Silent(name, since, now)
}

func (n *node) simToMono(d time.Duration) time.Duration { return time.Duration(float64(d) * n.rate) }

// rebuildRing places partitions on the members alive (not leaving), voters or not,
// admitted (voters, or seen alive for a lease's length), that have not gone silent
// (node.rebuildRing does the same).
func (n *node) rebuildRing() {
	voters := n.keeper.Voters()
	now := n.mono()
	var names []string
	for _, name := range sortedViewNames(n.view) {
		m := n.view[name]
		admitted := slices.Contains(voters, name) || n.w.sched.now-m.since >= n.w.leaseCfg.Duration
		if m.state == alive && admitted && !n.silent(name, now) {
			names = append(names, name)
		}
	}
	if len(names) == 0 || slices.Equal(names, n.inRing) {
		return
	}
	n.inRing = names
	ms := make([]ring.Member, len(names))
	for i, name := range names {
		ms[i] = ring.Member{Name: name, RPCAddr: name}
	}
	rg := ring.New(ms, ring.Config{Placement: n.w.opt.Placement, PartitionCount: n.w.opt.Partitions, ReplicationFactor: 20})
	if n.ring != nil && n.ring.Epoch() == rg.Epoch() {
		return
	}
	n.ring = rg
	n.owner.SetRing(rg)
	n.w.trace("%s: ring %v (voters %v)", n.name, names, voters)
}

func (n *node) stoppedGracefully() bool { return n.graceful }

// ownerIn returns the node's ring and whether it holds the node itself.
func (n *node) ownerIn() (string, bool) {
	if n.ring == nil {
		return "", false
	}
	_, ok := n.ring.Member(n.name)
	return n.name, ok
}

// ownerOf is the owner of key in the node's ring.
func (n *node) ownerOf(key string) (string, bool) {
	if n.ring == nil {
		return "", false
	}
	m, ok := n.ring.Owner(key)
	return m.Name, ok
}

// decide hands ops to the owner, as the router does for ops of this node's, and the
// results to done once decided.
func (n *node) decide(ops []counter.Op, done func([]counter.Result)) {
	res := make([]counter.Result, len(ops))
	counter.Start(bg, n.owner, &counter.Batch{Ops: ops, Results: res, Done: func() {
		n.checkDeciders(ops) // (soon: the owner answers under its lock)
		for i := range ops {
			if ops[i].Kind == counter.Borrow && res[i].Lent != nil {
				n.w.noteLent(n, &ops[i], res[i].Lent)
			}
		}
		if debugKey != "" {
			for i := range ops {
				if ops[i].Key == debugKey {
					n.w.trace("DEBUG %s decides %v %s n=%d: count %d err %v", n.name, ops[i].Kind, ops[i].Key, ops[i].N, res[i].Count, res[i].Err)
				}
			}
		}
		done(res)
	}})
}

var debugKey = os.Getenv("LEAPCOUNT_SIM_DEBUG_KEY")

// seesLeaving reports whether this node's gossip shows the member named leaving or
// left (owner.Config.Leaving).
func (n *node) seesLeaving(name string) bool {
	v := n.view[name]
	return v != nil && (v.state == leaving || v.state == left)
}

// checkDeciders checks, at once after this event, the deciders of the partitions of
// ops (world.checkDecider): the owner answers under its lock, which the check takes.
func (n *node) checkDeciders(ops []counter.Op) {
	if n.ring == nil {
		return
	}
	var ps []int
	for i := range ops {
		if p := n.ring.Partition(ops[i].Key); !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	n.w.sched.after(0, nil, func() {
		for _, p := range ps {
			n.w.checkDecider(p)
		}
	})
}
