package owner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// A node that hands counters on directly while its write of them is in doubt (sent as
// Redis froze) gives the receiver that write as a fence.
func TestHandoffCarriesTheWriteInDoubtAsAFence(t *testing.T) {
	srv := startRedisServer(t)
	st := openStore(t, srv.URL(), fallback.Config{ReadTimeout: 150 * time.Millisecond, BreakerFailures: -1})
	n, a, b, two, k := fiveForB(t, st)
	srv.Pause()
	defer srv.Resume()
	do(a.Owner, incr(k, 1))
	eventually(t, "a's write of the 6th increment in doubt", func() error {
		if !a.InDoubt() {
			return errors.New("not yet")
		}
		return nil
	})
	var mu sync.Mutex
	var fences []HandoffFence
	n.fail = func(to string, h *Handoff) (bool, bool) {
		if len(h.Counters) > 0 {
			mu.Lock()
			fences = append(fences, h.Fences...)
			mu.Unlock()
		}
		return false, false
	}
	b.SetRing(two)
	a.SetRing(two)
	if err := a.WaitReleased(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fences) == 0 || fences[0].WriterKey != "lc:{w}:w:a.test" || fences[0].Seq == 0 {
		t.Fatalf("fences handed on: got %+v; want a's writer key with the seq of its write in doubt", fences)
	}
}

// Counters handed over with a fence are not reloaded from Redis (their partition went
// stale) until Redis shows the fenced write applied: a reload before would miss it.
func TestFencedCountersReloadOnlyOnceTheWriteApplied(t *testing.T) {
	srv, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	k := "{fenced}k"
	p := ringOf("b").Partition(k)
	if err := writeElsewhere(st, k, 5, t0); err != nil { // an earlier owner's, written
		t.Fatal(err)
	}
	// The ghost counted 7 and its write of the last 2 is in doubt: seq 1 of its key.
	const ghostKey = "lc:{w}:w:ghost" // fallback's writer key of writer "ghost" on one server
	h := &Handoff{From: "ghost", ID: 1, Partitions: []int{p},
		Counters: []HandoffCounter{{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: t0 / sp.BucketMs(), Count: 7}}}},
		Fences:   []HandoffFence{{WriterKey: ghostKey, Seq: 1}}}
	if err := b.Handoff(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	// Memory answers 7 until the next poll of the late-write marks makes the partition
	// stale (a Handoff without the epoch b knows: reloadWhenBack), and the reload then
	// waits for the fence: either answer is right here, another count is not. (Asking
	// for 7 failed 1 run in 3 under load: the poll came first.)
	if r := do(b.Owner, count(k))[0]; r.Err == nil && r.Count != 7 {
		t.Fatalf("count as the counter came: got %d; want 7 (or an error, once it waits for the fence)", r.Count)
	}
	b.lapse(p) // its memory goes stale, if it was not yet: it is to be reloaded
	b.leases.grant(true, p)
	b.kick()
	if r := do(b.Owner, count(k))[0]; r.Err == nil {
		t.Fatalf("count before the fenced write applied: got %d; want an error (a reload now reads 5)", r.Count)
	}
	// The ghost's write applies, as its script would: the 2 and its mark.
	if err := writeElsewhere(st, k, 2, t0); err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.Set(context.Background(), ghostKey, 1, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	countIs(t, b.Owner, k, 7)
	if loaded, _ := b.Loads(); loaded == 0 {
		t.Fatal("the counter was not reloaded: the test proves nothing")
	}
}

// A node whose write of counters it handed on under a fence is still in doubt when Redis
// loses its data does not send that write again: the write applied, the receiver
// counted it (it loaded the counter once Redis showed the fence reached) and writes its
// memory back in full, and the record that makes a call apply once went with Redis's
// data (sim seed 2872: three counters counted 2-7 increments twice).
func TestWriteInDoubtOfCountersSentInAHandoffIsNotSentAgainAfterRedisLostItsData(t *testing.T) {
	srv, st, a, b, cut, k := sixthInDoubtOfTwo(t)
	two := ringOf("a", "b")
	b.SetRing(two)
	a.SetRing(two)
	if err := a.WaitReleased(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.leases.grantAll()
	// a sends nothing again until Redis lost its data: a retry of its write in doubt
	// between Resume and FlushAll would find it applied, and leave nothing to test
	// (it did, 1 run in 30).
	cut.cut.Store(true)
	srv.Resume()
	redisIs(t, st, k, 6) // the call in doubt applied as Redis came back
	eventually(t, "b counts 6", func() error {
		if r := do(b.Owner, count(k))[0]; r.Err != nil || r.Count != 6 {
			return fmt.Errorf("count on b: %d, %v", r.Count, r.Err)
		}
		return nil
	})
	emptyRedisWhileInDoubt(t, srv, a, cut)
	writesUntil(t, "b writes its memory back in full", b.Owner, st, k, 6, "")
	a.flushOnce(context.Background())
	if a.InDoubt() {
		t.Fatal("a's write still in doubt after a flush with Redis up")
	}
	if got, err := fallbacktest.Count(context.Background(), st, k, sp, t0); err != nil || got != 6 {
		t.Fatalf("Redis counts %d, %v after a's flush; want 6 (a's write in doubt counted twice)", got, err)
	}
	mustCount(t, b.Owner, k, 6)
}

// The same with a write-behind that flushes in parts (Config.FlushBatch): the write in
// doubt is the first part's, the other counters' deltas wait in the store behind it and
// go with them as their pending part. Once Redis lost its data, the part in doubt is not
// sent again, and nothing is counted twice or lost (sim TestSimulationInParts runs whole
// clusters so).
func TestWriteInDoubtOfAFlushInPartsIsNotSentAgainAfterRedisLostItsData(t *testing.T) {
	srv := startRedisServer(t)
	st := openStore(t, srv.URL(), fallback.Config{ReadTimeout: 150 * time.Millisecond, BreakerFailures: -1})
	var cut *cutRedis
	n := net{flush: time.Hour, batch: 1, wrap: func(r Redis) Redis {
		cut = &cutRedis{Redis: r}
		return cut
	}}
	a := n.sole(t, "a", st)
	n.wrap = nil
	b := n.add(t, "b", st)
	two := ringOf("a", "b")
	ks := keysOf(two, "b", 3)
	for _, k := range ks {
		do(a.Owner, incr(k, 5))
	}
	a.flushOnce(context.Background()) // in three parts, one after the other
	for _, k := range ks {
		redisIs(t, st, k, 5)
	}
	srv.Pause()
	for _, k := range ks {
		do(a.Owner, incr(k, 1))
	}
	a.kickFlush()
	eventually(t, "a's write of a first part in doubt", func() error {
		if !a.InDoubt() {
			return errors.New("not yet")
		}
		return nil
	})
	cut.cut.Store(true) // a sends nothing again until Redis lost its data
	srv.Resume()
	applied := 0
	for _, k := range ks {
		if redisCount(t, st, k) == 6 {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("%d counters at 6 in Redis once the part in doubt applied; want 1 (a part of one counter)", applied)
	}
	b.SetRing(two)
	a.SetRing(two) // Redis cut for a: the counters go to b directly, the part in doubt as a fence
	if err := a.WaitReleased(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.leases.grantAll()
	eventually(t, "b counts 6 of each", func() error {
		for _, k := range ks {
			if r := do(b.Owner, count(k))[0]; r.Err != nil || r.Count != 6 {
				return fmt.Errorf("count of %s on b: %d, %v", k, r.Count, r.Err)
			}
		}
		return nil
	})
	emptyRedisWhileInDoubt(t, srv, a, cut)
	eventually(t, "b writes its memory back in full", func() error {
		b.Tick()
		b.flushOnce(context.Background())
		for _, k := range ks {
			if got, err := fallbacktest.Count(context.Background(), st, k, sp, t0); err != nil || got != 6 {
				return fmt.Errorf("Redis counts %d of %s, %v; want 6", got, k, err)
			}
		}
		return nil
	})
	a.flushOnce(context.Background())
	a.flushOnce(context.Background())
	if a.InDoubt() {
		t.Fatal("a's write still in doubt after its flushes with Redis up")
	}
	for _, k := range ks {
		if got := redisCount(t, st, k); got != 6 {
			t.Fatalf("Redis counts %d of %s after a's flushes; want 6 (a's write in doubt counted twice)", got, k)
		}
		mustCount(t, b.Owner, k, 6)
	}
}

// Counters handed over under a fence by a sender that knew Redis at this node's epoch are
// not taken into memory: they load from Redis once the fenced write applied. Should
// Redis lose its data before that, the fence goes, and so does the sender's write in
// doubt (dropSentInHandoffs: the receiver writes its memory back in full, them included), so
// the receiver writes them back as they came, the best there is: a load from the
// emptied Redis would have none of them (sim seed 4462: a counter handed over at 95,
// its sender's write of 5 of them in doubt, loaded at 0 after Redis restarted empty).
func TestFencedCountersTakenFromRedisAreWrittenBackWhenRedisLostItsData(t *testing.T) {
	srv, st := startRedis(t)
	var n net
	b := n.sole(t, "b", st)
	rg := ringOf("b")
	ks := keysOf(rg, "b", 2)
	k := ks[0]
	p := rg.Partition(k)
	if err := writeElsewhere(st, k, 5, t0); err != nil { // the sender's writes that applied
		t.Fatal(err)
	}
	do(b.Owner, incr(ks[1], 1))
	b.flushOnce(context.Background())
	b.lock()
	epoch := b.flush.epoch
	b.unlock()
	if epoch == "" {
		t.Fatal("b knows no epoch after a flush: the test needs one")
	}
	// The sender counted 7; its write of the last 2 is in doubt: seq 1 of its key.
	const ghostKey = "lc:{w}:w:ghost"
	h := &Handoff{From: "ghost", ID: 1, RedisEpoch: epoch, Partitions: []int{p},
		Counters: []HandoffCounter{{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: t0 / sp.BucketMs(), Count: 7}}}},
		Fences:   []HandoffFence{{WriterKey: ghostKey, Seq: 1}}}
	if err := b.Handoff(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if r := do(b.Owner, count(k))[0]; r.Err == nil {
		t.Fatalf("count before the fenced write applied: got %d; want an error (the counter loads from Redis: the test needs it)", r.Count)
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b writes the counter back as it came", func() error {
		b.Tick()
		b.flushOnce(context.Background())
		if got, err := fallbacktest.Count(context.Background(), st, k, sp, t0); err != nil || got != 7 {
			return fmt.Errorf("Redis counts %d, %v; want 7", got, err)
		}
		return nil
	})
	mustCount(t, b.Owner, k, 7)
}

// A node that finds Redis emptied while a write of a counter is in doubt queues the
// counter's write-back in full behind that write; if it then hands the counter on
// directly, the write-back goes with it, as the receiver's to write. The write in doubt
// is not sent again: it may have applied before the loss, and the emptied Redis no
// longer knows, so sent again after the receiver's write-back it would count twice
// (sim seed 8948: a counter at 90 where 89 were counted).
func TestWriteInDoubtIsNotSentAgainOverAWriteBackSentInAHandoff(t *testing.T) {
	srv, st, a, b, cut, k := sixthInDoubtOfTwo(t)
	two := ringOf("a", "b")
	cut.cut.Store(true) // a reaches Redis no more: it sends nothing again for now
	srv.Resume()
	redisIs(t, st, k, 6) // the call in doubt applied as Redis came back
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	a.lock()
	a.writeBackInFull() // as its next look at the stamps' epoch does: the 6 go behind the write in doubt
	a.unlock()
	b.SetRing(two)
	a.SetRing(two) // Redis down for a: the counter goes to b directly, the write-back with it
	if err := a.WaitReleased(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.leases.grantAll()
	b.flushOnce(context.Background())
	redisIs(t, st, k, 6) // b's write: the reset, then the 6
	cut.cut.Store(false)
	a.flushOnce(context.Background())
	a.flushOnce(context.Background())
	if a.InDoubt() {
		t.Fatal("a's write still in doubt after its flushes with Redis up")
	}
	if got := redisCount(t, st, k); got != 6 {
		t.Fatalf("Redis counts %d after a's flushes; want 6 (a's write in doubt counted twice)", got)
	}
}

// cutRedis is a node's way to Redis, which the test cuts: then every call fails unsent
// (answered on another goroutine, as Redis's answers come).
type cutRedis struct {
	Redis
	cut atomic.Bool
}

var errCut = fmt.Errorf("%w: the test cut the way to Redis", counter.ErrUnavailable)

func (c *cutRedis) Healthy() bool { return !c.cut.Load() && c.Redis.Healthy() }

func (c *cutRedis) SendBatch(b Batch, done func(error)) {
	if c.cut.Load() {
		go done(errCut)
		return
	}
	c.Redis.SendBatch(b, done)
}

func (c *cutRedis) LoadMany(ctx context.Context, refs []fallback.CounterRef, now int64, done func([]fallback.Loaded)) {
	if c.cut.Load() {
		out := make([]fallback.Loaded, len(refs))
		for i := range out {
			out[i].Err = errCut
		}
		go done(out)
		return
	}
	c.Redis.LoadMany(ctx, refs, now, done)
}

func (c *cutRedis) Written(n int, ps []int, done func([]int64, error)) {
	if c.cut.Load() {
		go done(nil, errCut)
		return
	}
	c.Redis.Written(n, ps, done)
}

func (c *cutRedis) StampWritten(n int, ps []int, now int64, epoch string, done func(string, error)) {
	if c.cut.Load() {
		go done("", errCut)
		return
	}
	c.Redis.StampWritten(n, ps, now, epoch, done)
}

func (c *cutRedis) MarkLate(n int, ps []int, done func(error)) {
	if c.cut.Load() {
		go done(errCut)
		return
	}
	c.Redis.MarkLate(n, ps, done)
}

func (c *cutRedis) LateMarks(n int, since int64, done func(int64, map[int]int64, error)) {
	if c.cut.Load() {
		go done(0, nil, errCut)
		return
	}
	c.Redis.LateMarks(n, since, done)
}

func (c *cutRedis) Reached(fs []fallback.Fence, done func(bool, error)) {
	if c.cut.Load() {
		go done(false, errCut)
		return
	}
	c.Redis.Reached(fs, done)
}

func (c *cutRedis) Epoch(n int, done func(string, error)) {
	if c.cut.Load() {
		go done("", errCut)
		return
	}
	c.Redis.Epoch(n, done)
}

func (c *cutRedis) ProbeReplicas(now int64, done func(error)) {
	if c.cut.Load() {
		go done(errCut)
		return
	}
	c.Redis.ProbeReplicas(now, done)
}

// sixthInDoubt has a count 5 increments of k and write them to Redis, then a 6th whose
// write is in doubt: Redis (srv) paused as it was sent.
// emptyRedisWhileInDoubt has Redis lose its data while a's write is in doubt, and then
// lets a reach Redis again.
func emptyRedisWhileInDoubt(t *testing.T, srv *testredis.Server, a *testOwner, cut *cutRedis) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if !a.InDoubt() {
		t.Fatal("a sent its write again before Redis lost its data: the test proves nothing")
	}
	cut.cut.Store(false)
}

func sixthInDoubt(t *testing.T, a *testOwner, srv *testredis.Server, st *fallback.Store, k string) {
	t.Helper()
	do(a.Owner, incr(k, 5))
	a.flushOnce(context.Background())
	redisIs(t, st, k, 5)
	srv.Pause()
	do(a.Owner, incr(k, 1))
	a.kickFlush()
	eventually(t, "a's write of the 6th increment in doubt", func() error {
		if !a.InDoubt() {
			return errors.New("not yet")
		}
		return nil
	})
}

// sixthInDoubtOfTwo starts Redis and the owners a (the sole one, its way to Redis cut
// when the test says) and b, each writing only when the test says, and leaves a's write
// of the 6th increment of k, a counter b owns in the ring of both, in doubt (Redis
// paused).
func sixthInDoubtOfTwo(t *testing.T) (*testredis.Server, *fallback.Store, *testOwner, *testOwner, *cutRedis, string) {
	srv := startRedisServer(t)
	st := openStore(t, srv.URL(), fallback.Config{ReadTimeout: 150 * time.Millisecond, BreakerFailures: -1})
	var cut *cutRedis
	n := net{flush: time.Hour, wrap: func(r Redis) Redis {
		cut = &cutRedis{Redis: r}
		return cut
	}}
	a := n.sole(t, "a", st)
	n.wrap = nil
	b := n.add(t, "b", st)
	k := keysOf(ringOf("a", "b"), "b", 1)[0]
	sixthInDoubt(t, a, srv, st, k)
	return srv, st, a, b, cut, k
}
