package owner

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

// Leases is this node's hold on partitions (lease.Keeper in production).
type Leases interface {
	Now() int64                            // the leases' monotonic clock, ns
	Holds(p int, now int64) bool           // whether this node may decide p at now
	Until(p int) int64                     // when its lease of p ends (no one else holds p before); 0: not held
	Wait(ctx context.Context, p int) error // until this node may decide p
	SetClaims(lease.Set)                   // the partitions this node wants to hold
	Kick()                                 // renew now: a partition was just released to this node
	Quorate(now int64) bool                // whether this node reaches a majority of the voters
}

// Sender delivers Handoffs to other nodes (rpc.Client in production).
type Sender interface {
	Handoff(ctx context.Context, addr string, h *rpc.Handoff) error
}

// Config is what an Owner needs.
type Config struct {
	Self   string           // this node's member name
	Writer string           // unique per run: names this run's write-behind (fallback.NewBatch)
	Store  *leaparray.Store // made WithDeltas when Redis is set
	Redis  *fallback.Store  // nil: no persistence; Handoffs carry state
	Leases Leases
	Sender Sender
	Now    func() int64 // counters' clock, ms since the Unix epoch
	Limits counter.Limits

	FlushInterval time.Duration // default 100ms
	// AcquireWait bounds how long an op waits for this node to be granted its
	// partition (after a ring change) before it is answered "not owner" (default 1s).
	AcquireWait time.Duration
	Logger      *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.FlushInterval <= 0 {
		c.FlushInterval = 100 * time.Millisecond
	}
	if c.AcquireWait <= 0 {
		c.AcquireWait = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
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
	decide sync.RWMutex
	ring   atomic.Pointer[ring.Ring]
	parts  parts
	flush  flusher
	recv   received
	fenced fences // write-behind of other nodes that counters here wait for (fence.go)

	blindKeys   blindKeys   // counters started from empty memory while Redis was down (blind.go)
	refreshKeys refreshKeys // counters handed here directly, reloaded once Redis has their writes (late.go)
	late        lateMarks   // late writes: this node's to mark, and others' marks seen (late.go)

	loaded, skipped atomic.Int64 // counters loaded from Redis; created without a load

	releases sync.WaitGroup
	// stopped ends releases still trying when the owner closes: a release tries for as
	// long as the node runs (and, stopping, for its shutdown timeout, which the node
	// spends in WaitReleased).
	stopped context.Context
	stop    context.CancelFunc
	quit    chan struct{}
	done    chan struct{}
}

// New returns an Owner; Run starts its write-behind.
func New(cfg Config) *Owner {
	cfg = cfg.withDefaults()
	o := &Owner{cfg: cfg, local: counter.Local{Store: cfg.Store, Now: cfg.Now, Limits: cfg.Limits},
		quit: make(chan struct{}), done: make(chan struct{})}
	o.stopped, o.stop = context.WithCancel(context.Background())
	o.parts.init()
	o.flush.init()
	o.recv.init()
	return o
}

// Run writes deltas behind every FlushInterval, and cleans up partitions whose memory
// went stale, until Close.
func (o *Owner) Run() {
	defer close(o.done)
	t := time.NewTicker(o.cfg.FlushInterval)
	defer t.Stop()
	// The late-write marks are read at most once per FlushInterval (or 100 ms, when
	// that is longer): kicks come as often as ops wait for a flush.
	pollEvery := min(o.cfg.FlushInterval, 100*time.Millisecond)
	var polled time.Time
	for {
		select {
		case <-o.quit:
			o.flushOnce(context.Background()) // what the last tick left
			return
		case <-t.C:
		case <-o.flush.kick:
		}
		o.flushOnce(context.Background())
		if time.Since(polled) >= pollEvery {
			polled = time.Now()
			o.pollLate(context.Background())
		}
		o.cleanStale()
		o.expireLends()
	}
}

// Close stops write-behind after a last flush, and waits for it; releases still
// trying give up (what they held is lost, and logged).
func (o *Owner) Close() {
	o.stop()
	select {
	case <-o.quit:
	default:
		close(o.quit)
	}
	<-o.done
}

func spec(op *counter.Op) leaparray.Spec {
	return leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
}
