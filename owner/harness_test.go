package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
)

const t0 = 1_699_999_200_000

var sp = leaparray.Spec{WindowMs: 60_000, Buckets: 10}

// fakeLeases holds exactly the partitions the test grants.
type fakeLeases struct {
	mu       sync.Mutex
	held     map[int]bool
	refuse   map[int]int // partitions granted only after this many more Holds asks
	claims   lease.Set
	changed  chan struct{}
	kicks    int
	onChange func()        // the owner's LeasesChanged
	peerRun  atomic.Uint64 // the run heard of every peer; 0: 1
	onHolds  func()        // when set, called (once, then cleared) as Holds is first asked
	asked    atomic.Int64  // Holds calls
	until    time.Duration // DecideUntil and Until of a partition held (0: an hour; Until: for ever)
}

func newFakeLeases() *fakeLeases {
	return &fakeLeases{held: map[int]bool{}, changed: make(chan struct{})}
}

func (f *fakeLeases) Quorate(time.Duration) bool { return true }

func (f *fakeLeases) Incarnation(string) uint64 { return max(f.peerRun.Load(), 1) }

func (f *fakeLeases) LeftRun(string) uint64 { return 0 }

func (f *fakeLeases) DecideUntil(p int) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.held[p]:
		return 0
	case f.until > 0:
		return f.until
	}
	return time.Hour
}

func (f *fakeLeases) Holds(p int, _ time.Duration) bool {
	f.asked.Add(1)
	f.mu.Lock()
	if hook := f.onHolds; hook != nil {
		f.onHolds = nil
		f.mu.Unlock()
		hook()
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	if n, ok := f.refuse[p]; ok {
		if n > 0 {
			f.refuse[p] = n - 1
			return false
		}
		delete(f.refuse, p)
		f.held[p] = true // the grant arrives now
	}
	return f.held[p]
}

// grantAfter makes p held once asks more Holds calls have said it is not: a grant that
// arrives while a batch is being decided.
func (f *fakeLeases) grantAfter(p, asks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		f.refuse = map[int]int{}
	}
	f.held[p] = false
	f.refuse[p] = asks
}

// Until is until (or, unset, far off) for a partition held, 0 for one not held: a
// write confirmed while the test holds p is on time, one after is late.
func (f *fakeLeases) Until(p int) time.Duration {
	if !f.Holds(p, 0) {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until > 0 {
		return f.until
	}
	return math.MaxInt64
}

func (f *fakeLeases) Wait(ctx context.Context, p int) error {
	for {
		f.mu.Lock()
		held, ch := f.held[p], f.changed
		f.mu.Unlock()
		if held {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeLeases) SetClaims(s lease.Set) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = s.Clone()
}

func (f *fakeLeases) Kick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kicks++
}

func (f *fakeLeases) claimed(p int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims.Has(p)
}

// grant holds (or, with false, stops holding) the partitions ps.
func (f *fakeLeases) grant(hold bool, ps ...int) {
	f.mu.Lock()
	for _, p := range ps {
		f.held[p] = hold
	}
	close(f.changed)
	f.changed = make(chan struct{})
	onChange := f.onChange
	f.mu.Unlock()
	// After the unlock: the owner asks Holds. (A deferred call here ran before the
	// deferred unlock, and deadlocked whenever an op was waiting for the grant.)
	if onChange != nil {
		onChange()
	}
}

// grantAll holds every partition the owner claims now.
func (f *fakeLeases) grantAll() {
	f.mu.Lock()
	var ps []int
	f.claims.Each(func(p int) { ps = append(ps, p) })
	f.mu.Unlock()
	f.grant(true, ps...)
}

// net delivers Handoffs between test owners by name (addr = name); fail, when set,
// decides per call whether it fails unsent, or is applied and its answer lost.
type net struct {
	mu      sync.Mutex
	owners  map[string]*Owner
	fail    func(to string, h *Handoff) (drop, lose bool) // both: not delivered, the sender left in doubt
	refused atomic.Int64                                  // Handoffs refused by their receiver
	clock   atomic.Int64                                  // the counters' clock, ms; t0 until set
	flush   time.Duration                                 // owners' FlushInterval (default 20ms)
	batch   int                                           // owners' FlushBatch (0: DefaultFlushBatch)
	bounds  *leaparray.Bounds                             // the bounds of the stores of owners added next; nil: none
	wrap    func(Redis) Redis                             // when set, what the owners added next use as Redis
	run     uint64                                        // the run (Config.Incarnation) of the owners added next; 0: runs not checked
	logs    slog.Handler                                  // where the owners added next log (nil: nowhere)
	leavers map[string]bool                               // the members every owner sees leaving (Config.Leaving); under mu
	// redisClock, when set, is Redis's clock (TIME), ms, for the owners added next (n.now:
	// their clock agrees with Redis's, and they skip loads where they may, clock.go);
	// nil: Redis's own, which the tests' counters' clock is not (and scripts read: a
	// reset's deadline is on it, resetby.go).
	redisClock func() int64
}

// clockedRedis is a Redis whose clock (TIME) is now, ms: a real Redis's is the wall
// clock, which the tests' counters' clock is not.
type clockedRedis struct {
	Redis
	now func() int64
}

func (r clockedRedis) Time(done func(int64, error)) {
	go done(r.now()*1000, nil)
}

// leave makes every owner see the member named leaving gracefully (Config.Leaving).
func (n *net) leave(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leavers == nil {
		n.leavers = map[string]bool{}
	}
	n.leavers[name] = true
}

func (n *net) leaving(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leavers[name]
}

func (n *net) Handoff(ctx context.Context, addr string, h *Handoff) error {
	n.mu.Lock()
	o, fail := n.owners[addr], n.fail
	n.mu.Unlock()
	if o == nil {
		return fmt.Errorf("%w: no %s", counter.ErrNotSent, addr)
	}
	drop, lose := false, false
	if fail != nil {
		drop, lose = fail(addr, h)
	}
	switch {
	case drop && lose:
		return errors.New("no answer (not delivered)") // in doubt to the sender
	case drop:
		return fmt.Errorf("%w: dropped", counter.ErrNotSent)
	}
	err := o.Handoff(ctx, h)
	if errors.Is(err, ErrHandoffRefused) {
		n.refused.Add(1)
	}
	if lose {
		return errors.New("answer lost")
	}
	return err
}

func (n *net) now() int64 {
	if v := n.clock.Load(); v != 0 {
		return v
	}
	return t0
}

type testOwner struct {
	*Owner
	leases *fakeLeases
}

func (n *net) add(t testing.TB, name string, redis *fallback.Store) *testOwner {
	var opts []leaparray.Option
	if redis != nil {
		opts = append(opts, leaparray.WithDeltas())
	}
	if n.bounds != nil {
		opts = append(opts, leaparray.WithBounds(*n.bounds))
	}
	store := leaparray.NewStore(opts...)
	fl := newFakeLeases()
	every := n.flush
	if every == 0 {
		every = 20 * time.Millisecond
	}
	rio := RedisIO(redis)
	if rio != nil && n.redisClock != nil {
		rio = clockedRedis{rio, n.redisClock}
	}
	if n.wrap != nil && rio != nil {
		rio = n.wrap(rio)
	}
	logs := n.logs
	if logs == nil {
		logs = slog.DiscardHandler
	}
	o := New(Config{Self: name, Incarnation: n.run, Writer: name + ".test", Store: store, Redis: rio, Leases: fl, Peers: PeersIO(n),
		Now: n.now, FlushInterval: every, FlushBatch: n.batch, HandoffWait: time.Second, Leaving: n.leaving,
		Logger: slog.New(logs)})
	fl.onChange = o.LeasesChanged
	go o.Run()
	t.Cleanup(o.Close)
	t.Cleanup(func() {
		if c := o.UnknownTransitions(); c > 0 {
			t.Errorf("%s: %d partition state machine events unknown in their state", name, c)
		}
	})
	n.mu.Lock()
	if n.owners == nil {
		n.owners = map[string]*Owner{}
	}
	n.owners[name] = o
	n.mu.Unlock()
	if redis != nil {
		// Measure its clock against Redis's now, whenever its ticks come (a wrapped
		// Redis may not answer: then it goes on not knowing).
		o.lock()
		o.measureClock(o.cfg.Clock.Since())
		o.unlock()
		wait.True(5*time.Second, func() bool { return !o.clock.measuring.Load() })
	}
	return &testOwner{Owner: o, leases: fl}
}

func ringOf(names ...string) *ring.Ring {
	var ms []ring.Member
	for _, n := range names {
		ms = append(ms, ring.Member{Name: n, RPCAddr: n})
	}
	return ring.New(ms, ring.Config{})
}

// keysOf returns n keys whose partitions the ring gives to name.
func keysOf(rg *ring.Ring, name string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("k%d", i)
		if m, _ := rg.Owner(k); m.Name == name {
			out = append(out, k)
		}
	}
	return out
}

func incr(key string, n int64) counter.Op {
	return counter.Op{Kind: counter.Incr, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets, N: n}
}

func count(key string) counter.Op {
	return counter.Op{Kind: counter.Count, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets}
}

func reset(key string) counter.Op {
	return counter.Op{Kind: counter.Reset, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets}
}

// parked is how many requests wait on o for their partitions.
func (o *Owner) parked() int {
	o.waiting.mu.Lock()
	defer o.waiting.mu.Unlock()
	return o.waiting.total
}

// do decides ops on o and returns the results.
func do(o *Owner, ops ...counter.Op) []counter.Result {
	res := make([]counter.Result, len(ops))
	counter.Do(context.Background(), o, ops, res)
	return res
}

// mustCount reads key on o and fails unless it counts want.
//
// A count refused because the partition is not decided here yet (ErrNotOwner: its
// takeover outlasted HandoffWait, as on a machine loaded by make test's other packages)
// is asked again, up to a deadline; any count answered must be want.
func mustCount(t *testing.T, o *Owner, key string, want int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	r := do(o, count(key))[0]
	for errors.Is(r.Err, counter.ErrNotOwner) && time.Now().Before(deadline) {
		r = do(o, count(key))[0]
	}
	if r.Err != nil || r.Count != want {
		t.Fatalf("count %q on %s: got %d, %v; want %d", key, o.cfg.Self, r.Count, r.Err, want)
	}
}

// redisCount reads key's count straight from Redis.
func redisCount(t *testing.T, st *fallback.Store, key string) int64 {
	t.Helper()
	n, err := fallbacktest.Count(context.Background(), st, key, sp, t0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func startRedisServer(t testing.TB) *testredis.Server { return testredis.Start(t) }

// startRedisQuick is startRedis with a short read timeout, for tests that freeze Redis:
// a write then times out, and the breaker opens, sooner.
func startRedisQuick(t testing.TB) (*testredis.Server, *fallback.Store) {
	t.Helper()
	srv := startRedisServer(t)
	return srv, openStore(t, srv.URL(), fallback.Config{ReadTimeout: 300 * time.Millisecond})
}

// openStore opens a Store on url with timeouts a loaded machine meets, unless cfg
// says otherwise.
func openStore(t testing.TB, url string, cfg fallback.Config) *fallback.Store {
	t.Helper()
	cfg.URL, cfg.MinTTL = url, time.Hour
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 2 * time.Second
	}
	if cfg.BreakerCooldown == 0 {
		cfg.BreakerCooldown = 50 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := fallback.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func startRedis(t testing.TB) (*testredis.Server, *fallback.Store) {
	t.Helper()
	srv := startRedisServer(t)
	return srv, openStore(t, srv.URL(), fallback.Config{})
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	if err := wait.Until(10*time.Second, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sole adds an owner that the ring makes the only member, holding every partition.
// fiveForB is owner a alone in its ring, owner b not yet in it, and a key that b owns in
// ring two (a's and b's), counted 5 on a and written to Redis.
func fiveForB(t *testing.T, st *fallback.Store) (n *net, a, b *testOwner, two *ring.Ring, k string) {
	t.Helper()
	n = new(net)
	a, b = n.sole(t, "a", st), n.add(t, "b", st)
	two = ringOf("a", "b")
	k = keysOf(two, "b", 1)[0]
	do(a.Owner, incr(k, 5))
	redisIs(t, st, k, 5)
	return n, a, b, two, k
}

func (n *net) sole(t testing.TB, name string, redis *fallback.Store) *testOwner {
	o := n.add(t, name, redis)
	o.SetRing(ringOf(name))
	o.leases.grantAll()
	return o
}

// stopRedis stops srv and waits until st's breaker says Redis is down (o's ops probe it).
func stopRedis(t *testing.T, srv *testredis.Server, st *fallback.Store, o *Owner) {
	t.Helper()
	srv.Stop()
	breakerOpen(t, st, o)
}

// pauseRedis freezes srv (down, keeping its data) and waits until st's breaker says
// Redis is down (o's ops probe it).
func pauseRedis(t *testing.T, srv *testredis.Server, st *fallback.Store, o *Owner) {
	t.Helper()
	srv.Pause()
	breakerOpen(t, st, o)
}

func breakerOpen(t *testing.T, st *fallback.Store, o *Owner) {
	t.Helper()
	eventually(t, "breaker open", func() error {
		if st.Healthy() {
			do(o, count("probe"))
			return fmt.Errorf("Redis still looks up")
		}
		return nil
	})
}

// lapse ends o's lease of p while o holds it, as the lease keeper reports a lapse.
func (o *testOwner) lapse(p int) {
	o.leases.grant(false, p)
	s := lease.NewSet(o.parts.count())
	s.Add(p)
	o.Lapsed(s)
}

// writeElsewhere adds n to key in Redis at now as another node's write-behind would:
// it stamps the key's partition first (fallback.StampWritten), then writes.
func writeElsewhere(st *fallback.Store, key string, n, now int64) error {
	rg := ringOf("elsewhere")
	if _, err := st.StampWritten(context.Background(), rg.PartitionCount(), []int{rg.Partition(key)}, now, "elsewhere"); err != nil {
		return err
	}
	err := fallbacktest.Add(context.Background(), st, key, sp, n, now)
	return err
}

// flushOnce runs a flush that starts after it is called, and waits for its end.
func (o *Owner) flushOnce(ctx context.Context) {
	o.lock()
	target := o.flush.rounds.Load() + 1
	if o.flush.inFlight {
		target++ // the one in flight may have drained before the caller's last ops
	}
	o.flushStart()
	o.unlock()
	for o.flush.rounds.Load() < target {
		ch := make(chan struct{})
		o.lock()
		if o.flush.rounds.Load() >= target {
			o.unlock()
			break
		}
		o.flush.onEnd(func() { close(ch) })
		o.unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (o *Owner) kickFlush() { o.kick() }
