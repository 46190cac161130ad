package borrow

import (
	"errors"
	"math"
	"sync"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/mutate"
)

// Config configures a Borrower.
type Config struct {
	// Now is this node's monotonic clock (clock.Clock.Since).
	Now func() time.Duration
	// HotAfter is how many allows of one counter another node owns, arriving here
	// within a Period (forwarded, or decided from a slice), make it hot: slices are asked
	// for hot counters only (default 100). A hot counter stays hot while half as many
	// come (hysteresis).
	HotAfter int
	// Period is the span those allows are counted over (default 1 s); a slice asked for
	// holds about a Period of them.
	Period time.Duration
	// Drift is the clocks' rate allowance, as the lease's (default 0.01): a slice's time
	// to live is shortened by twice it on this node's clock.
	Drift float64
	// MaxSlices bounds the slices held at once (default 4096), MaxTracked the counters
	// whose allows are counted in a Period (default 4096).
	MaxSlices, MaxTracked int
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Now == nil:
		return errors.New("borrow: Config.Now is required")
	case c.HotAfter < 0:
		return errors.New("borrow: Config.HotAfter must not be negative")
	case c.Period < 0:
		return errors.New("borrow: Config.Period must not be negative")
	case c.Drift < 0 || c.Drift >= 0.25:
		return errors.New("borrow: Config.Drift must be from 0 to 0.25")
	case c.MaxSlices < 0 || c.MaxTracked < 0:
		return errors.New("borrow: Config.MaxSlices and MaxTracked must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.HotAfter == 0 {
		c.HotAfter = 100
	}
	if c.Period == 0 {
		c.Period = time.Second
	}
	if c.Drift == 0 {
		c.Drift = 0.01
	}
	if c.MaxSlices == 0 {
		c.MaxSlices = 4096
	}
	if c.MaxTracked == 0 {
		c.MaxTracked = 4096
	}
	return c
}

// counterOf names a counter and the limit its allows ask for: a slice is lent against
// one limit, and spent on allows of that limit only.
type counterOf struct {
	key     string
	window  int64
	buckets int
	limit   int64
}

func counterFor(op *counter.Op) counterOf {
	return counterOf{key: op.Key, window: op.Window, buckets: op.Buckets, limit: op.Limit}
}

// slice is one slice held.
type slice struct {
	id     uint64
	n      int64
	spent  int64
	until  time.Duration // on Now: it is spent from only before
	base   int64         // the owner's count when it lent it (its own hits in)
	window int64
	bkts   int
}

// Return is a slice's unspent part to give back: Op (a counter.Return) goes to the
// counter's owner.
type Return struct {
	Op    counter.Op
	tries int
}

// maxTries bounds how often one Return is sent: a return whose answer was lost is sent
// again (the owner takes it once), up to this.
const maxTries = 3

// Borrower holds this node's slices. It is safe for concurrent use.
type Borrower struct {
	cfg Config

	mu      sync.Mutex
	held    map[counterOf]*slice
	asking  map[counterOf]bool // a Borrow is out for it
	cur     map[counterOf]int  // allows this period (count)
	prev    map[counterOf]int  // allows last period
	started time.Duration      // when this period began
	due     []Return           // returns to send
	stats   Stats
}

// Stats counts what a Borrower did.
type Stats struct {
	Asked, Lent, Spent, Returned, Expired uint64
}

// New returns a Borrower; cfg must pass Validate.
func New(cfg Config) (*Borrower, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Borrower{cfg: cfg, held: map[counterOf]*slice{}, asking: map[counterOf]bool{},
		cur: map[counterOf]int{}, prev: map[counterOf]int{}, started: cfg.Now()}, nil
}

// Sliceable reports whether op may be decided from a slice: an allow, or an incr
// judged by a limit (Envoy's ShouldRateLimit counts hits with incr and answers over the
// limit by the count).
func Sliceable(op *counter.Op) bool {
	return (op.Kind == counter.Allow || op.Kind == counter.Incr) && op.Limit > 0
}

// Spend decides op (Sliceable) from a slice held, if one is live and has room for it:
// the answer is allowed and marked Sliced, with the borrower's estimate of the count,
// and from is the slice's ID. Otherwise ok is false and op goes to its owner as before.
func (b *Borrower) Spend(op *counter.Op) (res counter.Result, from uint64, ok bool) {
	if !Sliceable(op) {
		return counter.Result{}, 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, now := counterFor(op), b.cfg.Now()
	s := b.held[c]
	if s == nil || s.spent+op.N > s.n || (now >= s.until && !mutate.On(mutate.SpendPastDeadline)) {
		return counter.Result{}, 0, false
	}
	s.spent += op.N
	b.stats.Spent += uint64(op.N)
	b.count(c, now)
	n := s.base + s.spent
	return counter.Result{Allowed: true, Sliced: true, Count: n, Remaining: max(0, op.Limit-n)}, s.id, true
}

// Ask notes that op (Sliceable) is forwarded to its owner, and returns how large a
// slice to ask for beside it (0: none): the caller sends AskFor(op, ask) with op, to
// the same owner. It asks for hot counters only, one at a time, and not while a slice
// with room is held.
func (b *Borrower) Ask(op *counter.Op) int64 {
	if !Sliceable(op) {
		return 0
	}
	c := counterFor(op)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	n := b.count(c, now)
	hot := n >= b.cfg.HotAfter || (b.prev[c] >= b.cfg.HotAfter && n >= b.cfg.HotAfter/2)
	if !hot || b.asking[c] || len(b.held) >= b.cfg.MaxSlices {
		return 0
	}
	if s := b.held[c]; s != nil && s.spent < s.n && now < s.until {
		return 0
	}
	b.asking[c] = true
	b.stats.Asked++
	return askSize(max(n, b.prev[c], 1), op, b.cfg.Period)
}

// askSize is how many units to ask for, for a counter with demand allows a period: a
// period's worth, or a bucket's where its buckets are shorter. A slice ends with the
// bucket it is lent in, so what it held past a bucket's demand would only come back
// unspent, and meanwhile stand between the limit and the other nodes.
func askSize(demand int, op *counter.Op, period time.Duration) int64 {
	if op.Buckets <= 0 {
		return int64(demand)
	}
	bucket := time.Duration(op.Window/int64(op.Buckets)) * time.Millisecond
	if bucket >= period {
		return int64(demand)
	}
	return max(1, int64(math.Ceil(float64(demand)*float64(bucket)/float64(period))))
}

// count adds one to c's ops this period (forwarded, or decided from a slice), and
// returns them. A counter decided from its slices is as hot as its ops say: counting
// forwards alone made it cool while its slice lasted, so that its next slice came only
// after HotAfter forwards more, and held no more than those. The caller holds mu.
func (b *Borrower) count(c counterOf, now time.Duration) int {
	b.turn(now)
	n, tracked := b.cur[c]
	if tracked || len(b.cur) < b.cfg.MaxTracked {
		n++
		b.cur[c] = n
	}
	return n
}

// turn starts a new period when the current one is over.
func (b *Borrower) turn(now time.Duration) {
	if now-b.started < b.cfg.Period {
		return
	}
	b.prev, b.cur = b.cur, b.prev
	clear(b.cur)
	if now-b.started >= 2*b.cfg.Period {
		clear(b.prev) // a whole period went by without allows
	}
	b.started = now
}

// AskFor is the Borrow that asks for a slice of ask units of op's counter: an ask alone
// (N 0), sent after op in the same batch.
func AskFor(op *counter.Op, ask int64) counter.Op {
	b := *op
	b.Kind, b.N, b.Ask = counter.Borrow, 0, ask
	return b
}

// Got takes the answer to op, a Borrow sent at sentAt (Now): its slice, if the owner
// lent one, is held from now on. A slice it replaces is given back.
func (b *Borrower) Got(op *counter.Op, sentAt time.Duration, res counter.Result) {
	c := counterFor(op)
	c.limit = op.Limit
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.asking, c)
	if res.Err != nil || res.Lent == nil {
		return
	}
	b.stats.Lent++
	ttl := time.Duration(float64(res.Lent.TTL) * (1 - 2*b.cfg.Drift))
	if old := b.held[c]; old != nil {
		b.giveBack(c, old)
	}
	b.held[c] = &slice{id: res.Lent.ID, n: res.Lent.N, until: sentAt + ttl, base: res.Count,
		window: op.Window, bkts: op.Buckets}
}

// Failed takes back the ask of op, a Borrow that got no answer to use.
func (b *Borrower) Failed(op *counter.Op) {
	b.mu.Lock()
	delete(b.asking, counterFor(op))
	b.mu.Unlock()
}

// giveBack ends s, queueing its unspent part for return.
func (b *Borrower) giveBack(c counterOf, s *slice) {
	delete(b.held, c)
	if left := s.n - s.spent; left > 0 {
		b.due = append(b.due, Return{Op: counter.Op{Kind: counter.Return, Key: c.key, Window: s.window,
			Buckets: s.bkts, N: left, SliceID: s.id}})
	}
}

// Due ends the slices whose time is up or that are spent, and returns the Returns to
// send now: theirs, and those to send again. The caller sends each and reports it with
// Sent.
func (b *Borrower) Due() []Return {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	for c, s := range b.held {
		if now >= s.until || s.spent >= s.n {
			if now >= s.until {
				b.stats.Expired++
			}
			b.giveBack(c, s)
		}
	}
	out := b.due
	b.due = nil
	return out
}

// Sent reports how r went: a return whose outcome is unknown is sent again with the
// next Due (the owner takes a slice back once), up to maxTries times.
func (b *Borrower) Sent(r Return, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.stats.Returned++
	case errors.Is(err, counter.ErrOutcomeUnknown) && r.tries+1 < maxTries:
		r.tries++
		b.due = append(b.due, r)
	}
}

// Held is how many slices this node holds.
func (b *Borrower) Held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// Keys is the keys of the counters this node holds slices of.
func (b *Borrower) Keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.held))
	for c := range b.held {
		out = append(out, c.key)
	}
	return out
}

// Stats returns what the Borrower did so far.
func (b *Borrower) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}
