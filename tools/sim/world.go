package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/ring"
)

// Timings of a simulated node: production's defaults, scaled down where only the
// ratios matter, so a run covers many leases in little simulated time.
const (
	flushInterval = 100 * time.Millisecond
	handoffWait   = 2 * time.Second // --handoff-wait
	retryWait     = 2 * time.Second // route.DefaultRetryWait
	gossipEvery   = 100 * time.Millisecond
)

var bg = context.Background()

// Options are one run's settings. Everything else comes from Seed.
type Options struct {
	Seed       uint64
	Redis      bool          // with Redis behind the nodes; without, counters move node to node
	Nodes      int           // nodes at the start (default 3; a fleet's 5 to 8)
	MaxNodes   int           // nodes at most, joins included (default 6; a fleet's 12)
	Partitions int           // ring partitions (default 64)
	Duration   time.Duration // of load and faults (default 20s); then it heals and checks
	Faults     bool          // inject faults (the default run does)
	// Placement is the ring's (default: ring.PlacementMatching on odd seeds,
	// ring.PlacementConsistent on even ones, so the checks cover both).
	Placement ring.Placement
	// FlushBatch bounds the counters of a write-behind batch (owner.Config.FlushBatch;
	// default production's, owner.DefaultFlushBatch, under which a run's few hundred
	// counters go in one batch a flush). A few counters a batch flush in many parts.
	FlushBatch int
}

// fleet reports whether the seed's run is a fleet's: one seed in four (with Redis and
// without) starts 5 to 8 nodes and grows to up to 12, with 5 voters (lease.Config.Voters)
// and the rest members that are not voters, so that the simulation checks leases held
// by members that grant none, and voters replaced among many members.
func (o Options) fleet() bool { return o.Seed%8 == 3 || o.Seed%8 == 4 }

func (o Options) withDefaults() Options {
	if o.Nodes == 0 {
		o.Nodes = 3
		if o.fleet() {
			o.Nodes = 5 + int(o.Seed/8%4)
		}
	}
	if o.MaxNodes == 0 {
		o.MaxNodes = 6
		if o.fleet() {
			o.MaxNodes = 12
		}
	}
	if o.Partitions == 0 {
		o.Partitions = 64
	}
	if o.Placement == 0 {
		o.Placement = ring.PlacementConsistent
		if o.Seed%2 == 1 {
			o.Placement = ring.PlacementMatching
		}
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.FlushBatch == 0 {
		o.FlushBatch = owner.DefaultFlushBatch
	}
	return o
}

// world is one simulated cluster: its scheduler, network, Redis, nodes and clients.
type world struct {
	opt      Options
	sched    sched
	rng      *rand.Rand
	net      *network
	redis    *redisServer
	nodes    []*node
	leaseCfg lease.Config
	epochMs  int64
	incs     uint64
	handoffs int

	keys        *keySet
	skew        skew     // fresh keys and a skewed clock (fresh.go)
	fresh       freshLog // fresh keys' answers
	ops         opStats
	inflight    int                                 // client ops sent and not answered
	decider     []*node                             // each partition's last decider seen (checkDeciders)
	wiped       map[string][]*wipeHeld              // write-backs in full owed after Redis lost its data (wipes.go)
	based       map[string]map[string]time.Duration // key → writer → when Redis last applied a base of it by that writer
	lastWipe    time.Duration                       // when Redis last lost its data
	slices      sliceStats                          // what the borrowers did (slices.go)
	lent        map[uint64]slicePromise             // every slice lent, by ID (slices.go)
	lateMisses  map[string][]lateMiss               // memories lacking a late write, by key (wipes.go)
	fenced      map[fenceAt]*fence                  // writer key and partition → what Handoffs of that partition said of its calls as fences
	loadEnd     time.Duration                       // clients stop, and faults end, at this time
	log         []string                            // the fault trace
	faults      int
	failures    []string // invariants broken while running
	unknownSeen bool     // checkTransitions failed the run already
}

func newWorld(opt Options) *world {
	opt = opt.withDefaults()
	w := &world{opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)),
		leaseCfg: lease.Config{Duration: time.Second}.WithDefaults(), epochMs: 1_700_000_000_000, fenced: map[fenceAt]*fence{},
		wiped: map[string][]*wipeHeld{}, based: map[string]map[string]time.Duration{}}
	w.net = newNetwork(w)
	w.redis = newRedisServer(w)
	w.keys = newKeySet(w)
	w.skew, w.fresh = drawSkew(opt), newFreshLog()
	return w
}

// jitter is a random span up to about 2d, never 0.
func (w *world) jitter(d time.Duration) time.Duration {
	return time.Duration(1 + w.rng.Int64N(int64(2*d)))
}

func (w *world) nextInc() uint64 {
	w.incs++
	return w.incs
}

func (w *world) byName(name string) *node {
	for _, n := range w.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// addNode makes a new node (not started).
func (w *world) addNode() *node {
	n := &node{w: w, idx: len(w.nodes), name: fmt.Sprintf("n%d", len(w.nodes)),
		rate: 1 + (w.rng.Float64()-0.5)*0.008, offset: time.Duration(w.rng.Int64N(int64(2*time.Second))) - time.Second}
	if n.idx == w.skew.node {
		n.offset += w.skew.offset
		w.trace("%s's counters' clock runs %v off the others'", n.name, w.skew.offset.Round(time.Millisecond))
	}
	w.nodes = append(w.nodes, n)
	return n
}

// trace records a line of what happened, for a failing seed's report.
func (w *world) trace(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%8.3fs ", w.sched.now.Seconds())+fmt.Sprintf(format, args...))
}

// fail records a broken invariant.
func (w *world) fail(format string, args ...any) {
	if len(w.failures) < 20 {
		w.failures = append(w.failures, fmt.Sprintf("t=%.3fs: ", w.sched.now.Seconds())+fmt.Sprintf(format, args...))
	}
}

// noteWrite is told each delta Redis applies, by the node that wrote it: one written
// after its writer's lease of the partition ended is a late write, which may admit past
// a limit until the partition's owner reloads it (docs/guarantees.md). So is one written
// under a lease granted again after a lapse, if it may hold counts from before the
// lapse: another node may have decided the partition in between without them. Deltas of
// a key go one batch at a time, so this one's counts came after the apply before the
// last one.
//
// A write that a Handoff named as a fence (the call was in doubt when its counters were
// handed over directly) is not late for the new owner: its counts came in the Handoff,
// and its loads wait for the write (owner fences), so nothing is allowed for it. It is
// late if a node that received no such Handoff began to decide the partition since it
// was named (fence.bypassed): that node loaded the counters without it.
func (w *world) noteWrite(n *node, d fallback.Delta, writer string, seq uint64) {
	if n == nil || n.keeper == nil {
		return
	}
	if n.applied == nil {
		n.applied = map[string]appliedAt{}
	}
	last := n.applied[d.Key]
	if last.seq != seq || last.writer != writer { // (a call may carry several deltas of a key: one apply)
		last = appliedAt{at: [2]time.Duration{last.at[1], w.sched.now}, writer: writer, seq: seq, before: last.at[0]}
		n.applied[d.Key] = last
	}
	rg := n.ring
	if rg == nil {
		return
	}
	p := rg.Partition(d.Key)
	f := w.fenced[fenceAt{writer, p}]
	fenced := f != nil && seq <= f.seq && seq > f.bypassed
	if h := w.keys.reset[d.Key]; h != nil && !n.keeper.Holds(p, n.mono()) {
		h.erasedBack = true // its reset, if it had one, was dropped (owner.stripLateResets)
	}
	lapsed, ok := n.lapsedAt[p]
	// A fence covers the new owner of the Handoff, not a node that decided the partition
	// while the writer's lease had lapsed, before that Handoff: a write that may hold
	// counts of before the lapse is late for it, fenced or not (seed 2358, once a leaver
	// waited for its writes in doubt to land rather than stopping without them).
	if !fenced && n.mono() >= n.keeper.Until(p) || ok && lapsed >= last.before {
		var sum uint64
		for _, b := range d.Buckets {
			sum += b.Count
		}
		w.keys.lateWrite(d.Key, int64(sum))
		w.lateUnseen(d.Key)
	}
}

// noteHandoff is told each Handoff applied.
func (w *world) noteHandoff(from, to *node, h *owner.Handoff) {
	if from.ring != nil {
		for _, c := range h.Counters {
			p := from.ring.Partition(c.Key)
			for _, f := range h.Fences {
				k := fenceAt{f.WriterKey, p}
				fc := w.fenced[k]
				if fc == nil {
					fc = &fence{to: map[*node]uint64{}}
					w.fenced[k] = fc
				}
				fc.to[to] = to.inc
				if !from.lateHandoff(p) { // (else the receiver may have decided without those counts already)
					fc.seq = max(fc.seq, f.Seq)
				}
			}
		}
	}
	if len(h.Counters) > 0 {
		w.trace("%s hands %d counters to %s (id %d)", from.name, len(h.Counters), to.name, h.ID)
	}
	for _, c := range h.Counters {
		if from.ring == nil {
			break
		}
		p := from.ring.Partition(c.Key)
		if to.handedIn[p] == nil {
			to.handedIn[p] = map[*node]uint64{}
		}
		to.handedIn[p][from] = from.inc
	}
	for _, c := range h.Counters {
		if debugKey != "" && c.Key == debugKey {
			var n, pending uint64
			for _, b := range c.Buckets {
				n += b.Count
			}
			for _, b := range c.Pending {
				pending += b.Count
			}
			w.trace("DEBUG %s hands %s (%d, pending %d, reset %v, fences %d) to %s in %d", from.name, c.Key, n, pending, c.Reset, len(h.Fences), to.name, h.ID)
		}
		if from.ring != nil && from.lapsedOnce(from.ring.Partition(c.Key)) {
			// Counted, some of them perhaps, under a lease that lapsed before they reached
			// Redis (Redis slow or unreachable from the sender), though the sender may hold
			// the partition again: another node may have decided without them meanwhile,
			// as for a late write (seed 92).
			var n uint64
			for _, b := range c.Pending {
				n += b.Count
			}
			w.keys.lateWrite(c.Key, int64(n))
		}
	}
}

// lapsedOnce reports whether n's lease of p lapsed in this run.
func (n *node) lapsedOnce(p int) bool {
	_, ok := n.lapsedAt[p]
	return ok
}

// appliedAt is when Redis applied a node's two last calls with deltas of a key, and
// which the last was.
type appliedAt struct {
	at     [2]time.Duration
	writer string
	seq    uint64
	before time.Duration // at[0] before the last call: what its deltas are judged by
}

// fenceAt is a writer's calls as a fence of one partition's counters.
type fenceAt struct {
	writer string
	p      int
}

// fence is what Handoffs of a partition said of a writer's calls in doubt: the highest
// they named (but for Handoffs of counts decided under a lease that lapsed since: see
// lateHandoff), the runs of the nodes they went to, and the highest named when a node
// that received none of them began to decide the partition (checkDecider): calls up to
// that one are late for it.
type fence struct {
	seq      uint64
	to       map[*node]uint64 // receiver → its run
	bypassed uint64
}

// bypass notes that d begins to decide p: the fences of p named in Handoffs that did not
// go to d's run do not hold d's loads back.
func (w *world) bypass(d *node, p int) {
	for k, f := range w.fenced {
		if k.p == p && f.to[d] != d.inc {
			f.bypassed = f.seq
		}
	}
}

// lateHandoff reports whether n hands on counters of p that it counted under a lease
// that has lapsed since: it is releasing p stale, or no longer holds p's lease and lost
// it once.
func (n *node) lateHandoff(p int) bool {
	if n.owner.PartitionState(p) == owner.ReleasingStale {
		return true
	}
	_, lapsed := n.lapsedAt[p]
	return lapsed && !n.keeper.Holds(p, n.mono())
}

// ambiguous is told of a Handoff in doubt that a node settled without an answer: taken
// as delivered, its counts are lost if its receiver never applied it; else they may
// count twice, should the receiver come back having applied it.
func (w *world) ambiguous(h *owner.Handoff, delivered bool) {
	for _, c := range h.Counters {
		var n, pending int64
		for _, b := range c.Buckets {
			n += int64(b.Count)
		}
		for _, b := range c.Pending {
			pending += int64(b.Count)
		}
		n = max(n, pending) // (a counter that travels as its pending part alone has no buckets)
		if delivered {
			w.keys.lose(c.Key, n)
		} else {
			w.keys.extra(c.Key, n)
		}
	}
}
