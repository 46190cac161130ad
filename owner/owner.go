package owner

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/clock"
	"github.com/leapcount/leapcount/internal/lockrank"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// Config is what an Owner needs.
type Config struct {
	Self        string           // this node's member name
	Incarnation uint64           // this node's incarnation: Handoffs meant for another are refused
	Writer      string           // unique per run: names this run's write-behind (fallback.NewBatch); WriterName(Self, Run)
	Store       *leaparray.Store // made WithDeltas when Redis is set
	Redis       Redis            // nil: no persistence; Handoffs carry state (RedisIO wraps a fallback.Store)
	Peers       Peers            // delivers Handoffs (PeersIO wraps peerrpc.Handoffs)
	Leases      Leases
	Clock       clock.Clock  // the monotonic clock, shared with Leases (nil: clock.Real)
	Now         clock.WallMs // the counters' clock
	Limits      counter.Limits
	Hot         counter.Observer // hears the key of every op decided here (nil: none)
	Tally       *counter.Tally   // counts the allows decided here (nil: none)
	// OnAmbiguous, when set, hears each Handoff in doubt whose fate the owner settles
	// without an answer (docs/guarantees.md): taken as delivered (its receiver left
	// gracefully since; lost if it had not applied it), or not (its receiver stayed out
	// of the ring; counted twice should it come back having applied it). Tests and the
	// simulation bound their checks by it.
	OnAmbiguous func(h *Handoff, delivered bool)
	// Leaving, when set, reports whether the member named, gone from the ring, left
	// gracefully (it announced its leave): it hands back what it holds before it stops,
	// so a partition whose counters went to it waits for them (lend.go) rather than be
	// decided without them. nil: no member is.
	Leaving func(member string) bool
	// ID seeds this run's Handoff ids (nil: from the wall clock, so that a restarted
	// node never reuses one); a simulation sets it to replay.
	ID func() uint64

	FlushInterval time.Duration // default 100ms
	// FlushBatch bounds the counters of one write-behind batch (default
	// DefaultFlushBatch): what write-behind holds outside the store is bounded by it,
	// and the rest waits in the store. A simulation makes it small, so that its flushes
	// go in many parts.
	FlushBatch int
	// HandoffWait bounds how long an op waits for this node to be granted its
	// partition (after a ring change) before it is answered "not owner" (default 1s).
	HandoffWait time.Duration
	Logger      *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.FlushInterval <= 0 {
		c.FlushInterval = 100 * time.Millisecond
	}
	if c.FlushBatch <= 0 {
		c.FlushBatch = DefaultFlushBatch
	}
	if c.HandoffWait <= 0 {
		c.HandoffWait = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.ID == nil {
		c.ID = func() uint64 { return uint64(time.Now().UnixNano()) }
	}
	return c
}

// Owner decides ops on the counters of the partitions this node holds. See the package
// doc.
type Owner struct {
	cfg   Config
	local counter.Local

	// decide is held shared while a batch of ops is checked and decided, and
	// exclusively while partitions change state: a partition that stops being decided
	// here has no op still being decided on it once the state has changed, so its
	// counters can be taken out of memory without losing an add.
	decide lockrank.RWMutex[lockrank.OwnerDecide]
	// mu orders everything that changes partitions and the work on them: ring changes,
	// lapses, ticks, received Handoffs and the outcomes of Redis and rpc calls. Ops
	// never take it.
	mu   lockrank.Mutex[lockrank.OwnerMu]
	ring atomic.Pointer[ring.Ring]

	inbox   inbox    // outcomes posted while another goroutine drives (drive.go)
	asked   []func() // calls the step under way asked for (under mu; drive.go)
	wakeDue bool     // the step under way ends by waking parked ops (under mu)

	parts       parts
	flush       flusher
	recv        received
	blind       blindKeys // counters started from empty memory while Redis was down (blind.go)
	late        lateMarks // the poll of late-write marks (late.go; each partition's are in its Record)
	waiting     waiters   // ops waiting for their partition (decide.go)
	releases    releases  // partitions being handed on (release.go)
	cleaning    bool      // a clean-up of stale memory is under way (under mu)
	selfLeaving bool      // Leave was called: no counters are taken in any more (under mu)
	redisEpoch  redisEpochWatch
	polled      time.Duration
	probing     bool         // a probe of Redis's replicas is under way (under mu; replicas.go)
	clock       clockWatch   // the counters' clock against Redis's (clock.go)
	redisNow    redisReading // Redis's clock, as the write-behind last read it (under mu; resetby.go)
	lend        lender       // the limit slices lent and not yet returned (slices.go)

	loaded, skipped atomic.Int64  // counters loaded from Redis; created without a load
	unknownSteps    atomic.Uint64 // events Step did not expect (UnknownTransitions)

	closed atomic.Bool
	quit   chan struct{}
	done   chan struct{}
}

// New returns an Owner; Run drives it in production (a simulation calls Tick).
func New(cfg Config) *Owner {
	cfg = cfg.withDefaults()
	o := &Owner{cfg: cfg, local: counter.Local{Store: cfg.Store, Now: cfg.Now, Limits: cfg.Limits, Hot: cfg.Hot, Tally: cfg.Tally},
		quit: make(chan struct{}), done: make(chan struct{})}
	o.flush.init()
	o.recv.init(cfg.ID())
	o.lend.init(cfg.ID())
	o.releases.init()
	return o
}

// Run ticks every FlushInterval (Tick) until Close, then writes what is left.
func (o *Owner) Run() {
	defer close(o.done)
	t := time.NewTicker(o.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-o.quit:
			o.lastFlush()
			return
		case <-t.C:
			o.Tick()
		}
	}
}

// Tick does the owner's periodic work: it writes deltas behind, reads the late-write
// marks, drops stale memory, ends lends that waited too long, and moves releases on.
// Run calls it every FlushInterval; a simulation calls it itself.
func (o *Owner) Tick() { o.do(o.tick) }

// tick is Tick's step. The caller holds mu.
func (o *Owner) tick() {
	now := o.cfg.Clock.Since()
	if o.writeBackDue() > 0 {
		o.kick()
	}
	o.flushStart()
	// The late-write marks are read at most once per FlushInterval (or 100 ms, when
	// that is longer): kicks come as often as ops wait for a flush.
	if now-o.polled >= min(o.cfg.FlushInterval, 100*time.Millisecond) {
		o.polled = now
		o.pollLate()
		o.checkEpoch(nil)
		o.probeReplicas()
		o.measureClock(now)
	}
	o.cleanStart()
	o.expireLends(now)
	o.expireFences(now)
	o.forgetSlices(now)
	o.stepReleases()
	o.wakeAfter()
}

// Close stops the owner: Run writes what is left behind, releases still trying give
// up (what they held is lost, and logged), and Close waits for Run.
func (o *Owner) Close() {
	if o.closed.Swap(true) {
		return
	}
	close(o.quit)
	<-o.done
	o.do(func() {
		o.abandonReleases()
		o.wakeAfter()
	})
}

// lastFlush writes behind what memory gained since the last flush, waiting (bounded)
// for the flush in flight and one more.
func (o *Owner) lastFlush() {
	if o.cfg.Redis == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for range 2 {
		if !o.flushRound(ctx) {
			return
		}
	}
}

// flushRound starts a flush (or asks for one after the flush in flight) and waits until
// the flush in flight ends, or ctx; it reports whether one ended.
func (o *Owner) flushRound(ctx context.Context) bool {
	ch := make(chan struct{})
	o.do(func() {
		o.flush.onEnd(func() { close(ch) })
		o.flushStart()
	})
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// SettleInDoubt writes behind again and again while a write-behind call of this node
// is in doubt (sent, not answered), until none is or ctx ends; it reports whether none
// is. A leaving node calls it after handing its counters on, before it leaves the
// cluster: the receivers hold fences on those calls, which only this run can send
// again. Once its run is over they drop the fences, and what the calls did not apply
// (Redis failed over to a replica that lacked it) is lost.
func (o *Owner) SettleInDoubt(ctx context.Context) bool {
	for warned := false; ; {
		if !o.flushRound(ctx) {
			return false
		}
		if !o.InDoubt() {
			return true
		}
		if !warned {
			warned = true
			o.cfg.Logger.Warn(MsgSettlingInDoubt)
		}
	}
}

// InDoubt reports whether, at the last flush's end, a write-behind call of this node was
// in doubt (sent, not answered): a node leaving waits for none to be (SettleInDoubt).
func (o *Owner) InDoubt() bool { return o.flush.inDoubt.Load() }

// MsgSettlingInDoubt is logged once by a SettleInDoubt that has to wait.
const MsgSettlingInDoubt = "leaving: write-behind in doubt is sent again until Redis confirms it, or the shutdown timeout"

func spec(op *counter.Op) leaparray.Spec {
	return leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
}

// redisUp reports whether Redis answers (always true without Redis). A batch takes it
// once and decides by that one answer throughout: were it asked again at each step, a
// counter could skip its load while Redis is down and then be decided, from empty
// memory, as if Redis were up, never to be reloaded (its Redis state lost from view).
func (o *Owner) redisUp() bool { return o.cfg.Redis == nil || o.cfg.Redis.Healthy() }

// Loads reports how many counters were loaded from Redis, and how many were created
// without a load because Redis could hold nothing of them (redisHoldsNothing).
func (o *Owner) Loads() (loaded, skipped int64) { return o.loaded.Load(), o.skipped.Load() }
