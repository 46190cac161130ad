package owner

import (
	"context"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/lease"
)

// The owner does no I/O of its own and never blocks on it: it asks for it through these
// interfaces, whose calls return at once, and hears the outcome through the callback,
// later: on another goroutine in production, as a later event of its scheduler in a
// simulation. A callback is never called before its call returns (the owner may hold
// its locks while it asks).

// Redis is the persistence the owner writes behind and loads from (production:
// fallback.Store, through RedisIO).
type Redis interface {
	Healthy() bool    // whether Redis answers (the breaker is closed)
	Reopened() uint64 // how many times Redis was found back after being unreachable
	NewBatch(writer string, ds []fallback.Delta) Batch
	SendBatch(b Batch, done func(error))
	LoadMany(ctx context.Context, refs []fallback.CounterRef, now int64, done func([]fallback.Loaded))
	Written(n int, ps []int, done func([]int64, error))
	StampWritten(n int, ps []int, now int64, epoch string, done func(string, error))
	MarkLate(n int, ps []int, done func(error))
	LateMarks(n int, since int64, done func(int64, map[int]int64, error))
	Reached(fs []fallback.Fence, done func(bool, error))
	Epoch(n int, done func(string, error))
	// Time reads Redis's clock, µs since the Unix epoch (fallback.Store.Time).
	Time(done func(int64, error))
	// ProbeReplicas writes nothing leapcount reads, while the last write's WAIT found
	// too few replicas, to find them back (fallback.Store.ProbeReplicas).
	ProbeReplicas(now int64, done func(error))
	// Rewrite replaces or drops deltas of b's unconfirmed calls, keeping each call's
	// seq (fallback.Store.Rewrite).
	Rewrite(b Batch, fn func(fallback.Delta) (fallback.Delta, bool)) int
	// DropInDoubt drops the deltas of b's calls in doubt that drop names
	// (fallback.Store.DropInDoubt).
	DropInDoubt(b Batch, drop func(fallback.Delta) bool) int
}

// Batch is write-behind that applies at most once (fallback.Batch).
type Batch interface {
	Confirmed() bool
	InDoubt() bool
	TakeUnsent() []fallback.Delta
	Fences(match func(fallback.Delta) bool) []fallback.Fence
	Unconfirmed() []fallback.Delta
	LateResets() []fallback.Delta
	RedisTime() int64
}

// Peers delivers Handoffs to other nodes (production: PeersIO over internal/peerrpc's
// Handoffs, on node's rpc client).
type Peers interface {
	Handoff(addr string, h *Handoff, done func(error))
}

// Leases is this node's hold on partitions (lease.Keeper in production). Its instants
// are on Config.Clock: the keeper runs on the same clock as the owner.
type Leases interface {
	Holds(p int, now time.Duration) bool // whether this node may decide p at now
	Until(p int) time.Duration           // when its lease of p ends (no one else holds p before); 0: not held
	DecideUntil(p int) time.Duration     // until when this node may decide p (Holds is now < DecideUntil)
	SetClaims(lease.Set)                 // the partitions this node wants to hold
	Kick()                               // renew now: a partition was just released to this node
	Quorate(now time.Duration) bool      // whether this node reaches a majority of the voters
	Incarnation(name string) uint64      // the run of the member named name, as last heard (0: unknown)
	LeftRun(name string) uint64          // its run that left gracefully, handing on what it held (0: none)
}

// Sender delivers Handoffs and waits for the outcome: nil when applied, a refusal
// (ErrHandoffRefused and those that wrap it), an error wrapping counter.ErrNotSent when
// it was certainly never sent, any other error when its outcome is unknown. In a node
// it is the rpc client, through internal/peerrpc's Handoffs, which translates its errors.
type Sender interface {
	Handoff(ctx context.Context, addr string, h *Handoff) error
}

// ioTimeout bounds each Redis call the production adapters make.
const ioTimeout = 5 * time.Second

// RedisIO runs st's calls on goroutines of their own (nil when st is nil: no Redis).
func RedisIO(st *fallback.Store) Redis {
	if st == nil {
		return nil
	}
	return redisIO{st}
}

type redisIO struct{ st *fallback.Store }

func bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), ioTimeout)
}

func (r redisIO) Healthy() bool    { return r.st.Healthy() }
func (r redisIO) Reopened() uint64 { return r.st.Reopened() }

func (r redisIO) NewBatch(writer string, ds []fallback.Delta) Batch { return r.st.NewBatch(writer, ds) }

func (r redisIO) SendBatch(b Batch, done func(error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.SendBatch(ctx, b.(*fallback.Batch)))
	}()
}

func (r redisIO) LoadMany(ctx context.Context, refs []fallback.CounterRef, now int64, done func([]fallback.Loaded)) {
	go func() { done(r.st.LoadMany(ctx, refs, now)) }()
}

func (r redisIO) Written(n int, ps []int, done func([]int64, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.Written(ctx, n, ps))
	}()
}

func (r redisIO) StampWritten(n int, ps []int, now int64, epoch string, done func(string, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.StampWritten(ctx, n, ps, now, epoch))
	}()
}

func (r redisIO) MarkLate(n int, ps []int, done func(error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.MarkLate(ctx, n, ps))
	}()
}

func (r redisIO) LateMarks(n int, since int64, done func(int64, map[int]int64, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.LateMarks(ctx, n, since))
	}()
}

func (r redisIO) Reached(fs []fallback.Fence, done func(bool, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.Reached(ctx, fs))
	}()
}

func (r redisIO) Rewrite(b Batch, fn func(fallback.Delta) (fallback.Delta, bool)) int {
	return r.st.Rewrite(b.(*fallback.Batch), fn)
}

func (r redisIO) DropInDoubt(b Batch, drop func(fallback.Delta) bool) int {
	return r.st.DropInDoubt(b.(*fallback.Batch), drop)
}

func (r redisIO) ProbeReplicas(now int64, done func(error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.ProbeReplicas(ctx, now))
	}()
}

func (r redisIO) Time(done func(int64, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.Time(ctx))
	}()
}

func (r redisIO) Epoch(n int, done func(string, error)) {
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		done(r.st.Epoch(ctx, n))
	}()
}

// handoffTimeout bounds one delivery of a Handoff (it is sent again if it goes
// unanswered).
const handoffTimeout = 5 * time.Second

// PeersIO runs s's deliveries on goroutines of their own.
func PeersIO(s Sender) Peers { return peersIO{s} }

type peersIO struct{ s Sender }

func (p peersIO) Handoff(addr string, h *Handoff, done func(error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), handoffTimeout)
		defer cancel()
		done(p.s.Handoff(ctx, addr, h))
	}()
}
