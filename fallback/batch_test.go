package fallback

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// loseReplies makes b as it would be had no reply of its last send come back: every
// call in doubt, to be sent again.
func loseReplies(b *Batch) {
	for _, c := range b.calls {
		c.state = inDoubt
	}
}

// batchDeltas makes n deltas on counters prefix0..prefix<n-1>, counter i gaining i+1.
func batchDeltas(prefix string, n int, sp leaparray.Spec, now int64) []Delta {
	deltas := make([]Delta, n)
	for i := range deltas {
		deltas[i] = Delta{Key: prefix + strconv.Itoa(i), Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(i + 1)}}}
	}
	return deltas
}

// countsOf reads every delta's counter through st; -1 for one that fails.
func countsOf(st *Store, deltas []Delta, now int64) []int64 {
	out := make([]int64, len(deltas))
	for i, d := range deltas {
		c, err := st.Count(bg, d.Key, d.Spec, now)
		if err != nil {
			c = -1
		}
		out[i] = c
	}
	return out
}

// wantCounts wants counter i of deltas to count i+1: applied exactly once.
func wantCounts(t *testing.T, st *Store, deltas []Delta, now int64, when string) {
	t.Helper()
	for i, c := range countsOf(st, deltas, now) {
		if c != int64(i+1) {
			t.Fatalf("%s: %s counts %d; want %d", when, deltas[i].Key, c, i+1)
		}
	}
}

// A batch whose replies were lost (Redis hung past the read timeout) is in doubt; Redis,
// back, runs what it had received; the batch sent again then finds every call at or
// below its writer's high-water mark, and each delta is counted once. On one server and on a Cluster (whose client also
// resends a pipeline after a timeout, on its own).
func TestBatchResentAfterLostReplyAppliesOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (string, []*testredis.Server)
	}{
		{"single", func(t *testing.T) (string, []*testredis.Server) {
			srv := testredis.Start(t)
			return srv.URL(), []*testredis.Server{srv}
		}},
		{"cluster", func(t *testing.T) (string, []*testredis.Server) {
			nodes := testredis.StartCluster(t, 3)
			return testredis.ClusterURL(nodes), nodes
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, srvs := tc.start(t)
			// Short timeouts: the test is about a reply that times out. The breaker stays
			// closed, so every send goes to Redis. check reads, with generous timeouts.
			st := open(t, url, shortTimeouts(Config{FlushKeys: 8, BreakerFailures: -1}))
			check := open(t, url, Config{})
			sp := spec(60_000, 60)
			now := int64(1_700_000_000_000)
			deltas := batchDeltas("lost", 100, sp, now)
			// An idle connection to every node the batch goes to, so that its pipelines
			// are written before Redis hangs (a new connection would hang in its handshake).
			testredis.Poll(t, 20*time.Second, "connections to every node", func() error {
				_, err := countAll(st, refsOf(deltas), now)
				return err
			})
			b := st.NewBatch("t1", deltas)
			for _, s := range srvs {
				s.Pause()
			}
			err := st.SendBatch(bg, b)
			for _, s := range srvs {
				s.Resume()
			}
			if !errors.Is(err, counter.ErrUnavailable) || b.Confirmed() || !b.InDoubt() || len(b.Refs()) != len(deltas) {
				t.Fatalf("send to a hung Redis: %v, confirmed %v, in doubt %v, %d refs; want ErrUnavailable, false, true, %d",
					err, b.Confirmed(), b.InDoubt(), len(b.Refs()), len(deltas))
			}
			if got := b.TakeUnsent(); len(got) != 0 {
				t.Fatalf("TakeUnsent after a timeout took %d deltas; want none (they may have run)", len(got))
			}
			testredis.Poll(t, 20*time.Second, "Redis ran the calls it had received", func() error {
				if got := countsOf(check, deltas, now); slices.Contains(got, 0) || slices.Contains(got, -1) {
					return fmt.Errorf("counts %v", got)
				}
				return nil
			})
			testredis.Poll(t, 20*time.Second, "batch confirmed", func() error {
				if err := st.SendBatch(bg, b); err != nil {
					return err
				}
				return nil
			})
			if !b.Confirmed() || b.InDoubt() || len(b.Refs()) != 0 {
				t.Fatalf("after a send that succeeded: confirmed %v, in doubt %v, refs %v; want true, false, none",
					b.Confirmed(), b.InDoubt(), b.Refs())
			}
			wantCounts(t, check, deltas, now, "after the batch was sent again")
		})
	}
}

// A batch sent any number of times applies once: every send after the first finds its
// calls at or below the writer's mark. On one server a writer has one key, holding its
// last call's seq for Config.OnceTTL; another batch of the same deltas applies again,
// and the first batch sent once more after it changes nothing.
func TestBatchSentManyTimesAppliesOnce(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), Config{FlushKeys: 7})
	rc := srv.Client(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	deltas := batchDeltas("many", 30, sp, now)
	b := st.NewBatch("t2", deltas)
	resetStats(t, srv)
	for send := range 4 {
		if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
			t.Fatalf("send %d: %v, confirmed %v; want nil, true", send, err, b.Confirmed())
		}
		loseReplies(b)
	}
	if got := evalshaCalls(t, srv); got != 4*5 {
		t.Fatalf("EVALSHA calls for 4 sends of 5 calls = %d; want 20", got)
	}
	wantCounts(t, st, deltas, now, "after 4 sends")
	if keys := rc.Keys(bg, "lc:*:w:*").Val(); !slices.Equal(keys, []string{"lc:{w}:w:t2"}) {
		t.Fatalf("writer keys %q; want only lc:{w}:w:t2", keys)
	}
	if got, want := rc.Get(bg, "lc:{w}:w:t2").Val(), strconv.FormatUint(b.calls[4].seq, 10); got != want {
		t.Fatalf("mark = %s; want %s, the last call's seq", got, want)
	}
	if ttl := rc.PTTL(bg, "lc:{w}:w:t2").Val(); ttl <= DefaultOnceTTL-time.Minute || ttl > DefaultOnceTTL {
		t.Fatalf("mark PTTL = %v; want about %v", ttl, DefaultOnceTTL)
	}
	if err := st.SendBatch(bg, st.NewBatch("t2", deltas)); err != nil {
		t.Fatal(err)
	}
	loseReplies(b)
	if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
		t.Fatalf("the first batch sent after the second: %v, confirmed %v; want nil, true", err, b.Confirmed())
	}
	for i, c := range countsOf(st, deltas, now) {
		if c != 2*int64(i+1) {
			t.Fatalf("%s after a second batch counts %d; want %d", deltas[i].Key, c, 2*(i+1))
		}
	}
}

// A call that fails inside Redis as a whole stops the later calls of its writer key in
// the same send (they would raise the mark over it, and it would be skipped as applied
// when sent again): nothing lands, and the batch sent again applies every call once.
func TestFailedCallStopsLaterCallsOfItsKey(t *testing.T) {
	_, st := startStore(t)
	st.cfg.FlushKeys = 1
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	deltas := batchDeltas("stop", 3, sp, now)
	b := st.NewBatch("t7", deltas)
	ttl := b.calls[0].argv()[0]
	b.calls[0].argv()[0] = "x" // its SET of the mark fails: the script errs before it writes
	err := st.SendBatch(bg, b)
	var fe *FlushError
	if !errors.As(err, &fe) || len(fe.Failed) != 3 || !errors.Is(err, errBehind) || b.Confirmed() {
		t.Fatalf("send with the first call failing: %v, confirmed %v; want all 3 deltas failed, errBehind, false",
			err, b.Confirmed())
	}
	if got := countsOf(st, deltas, now); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Fatalf("counts after the failed send %v; want none applied", got)
	}
	if b.calls[0].state != inDoubt || b.calls[1].state != unsent || b.calls[2].state != unsent {
		t.Fatalf("call states %d %d %d; want in doubt (an error reply), unsent, unsent (refused before they ran)",
			b.calls[0].state, b.calls[1].state, b.calls[2].state)
	}
	b.calls[0].argv()[0] = ttl
	if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
		t.Fatalf("send again: %v, confirmed %v; want nil, true", err, b.Confirmed())
	}
	wantCounts(t, st, deltas, now, "after the batch was sent again")
}

// With the breaker open nothing is sent: every call stays unsent (not in doubt),
// TakeUnsent returns every delta in order, and Redis, back, holds none of them. A Redis
// that refuses connections (the breaker not yet open) leaves the calls unsent too.
func TestTakeUnsentWhenRedisIsDown(t *testing.T) {
	srv := testredis.Start(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	deltas := batchDeltas("down", 50, sp, now)
	deltas[3].Reset = true
	deltas = append(deltas, Delta{Key: "down3", Spec: sp, Reset: true}) // a counter twice
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"breaker open", Config{FlushKeys: 7}}, {"refused", Config{FlushKeys: 7, BreakerFailures: -1}}} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t, srv.URL(), tc.cfg)
			if err := st.Ping(bg); err != nil {
				t.Fatal(err)
			}
			srv.Stop()
			if tc.cfg.BreakerFailures >= 0 {
				openBreaker(t, st)
			}
			b := st.NewBatch("t3", deltas)
			err := st.SendBatch(bg, b)
			var fe *FlushError
			if !errors.As(err, &fe) || len(fe.Failed) != len(deltas) || !errors.Is(err, counter.ErrUnavailable) {
				t.Fatalf("send with Redis down: %v; want a FlushError naming all %d deltas", err, len(deltas))
			}
			if tc.cfg.BreakerFailures >= 0 && !errors.Is(err, ErrRedisDown) {
				t.Fatalf("send with the breaker open: %v; want ErrRedisDown", err)
			}
			if b.Confirmed() || b.InDoubt() || len(b.Refs()) != len(deltas)-1 {
				t.Fatalf("confirmed %v, in doubt %v, %d refs; want false, false, %d", b.Confirmed(), b.InDoubt(), len(b.Refs()), len(deltas)-1)
			}
			got := b.TakeUnsent()
			if len(got) != len(deltas) {
				t.Fatalf("TakeUnsent took %d deltas; want %d", len(got), len(deltas))
			}
			for i := range got {
				if got[i].Key != deltas[i].Key || got[i].Reset != deltas[i].Reset || !slices.Equal(got[i].Buckets, deltas[i].Buckets) {
					t.Fatalf("TakeUnsent[%d] = %+v; want %+v", i, got[i], deltas[i])
				}
			}
			if !b.Confirmed() || len(b.Refs()) != 0 || len(b.TakeUnsent()) != 0 {
				t.Fatalf("after TakeUnsent: confirmed %v, refs %v; want an empty batch", b.Confirmed(), b.Refs())
			}
			srv.Restart()
			if n := srv.Client(t).DBSize(bg).Val(); n != 0 {
				t.Fatalf("Redis holds %d keys; want none", n)
			}
		})
	}
}

// A counter whose key holds another type fails alone and for good: the send that finds
// it reports it (naming it) and counts its call confirmed; the others land; sending
// again reports nothing more.
func TestBatchReportsCounterFailuresOnce(t *testing.T) {
	srv, st := startStore(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	deltas := batchDeltas("f", 5, sp, now)
	deltas = append(deltas, Delta{Key: "bad", Spec: spec(10, 3), Buckets: deltas[0].Buckets})
	srv.Do(t, "SET", counterKey("f2", sp), "x")
	b := st.NewBatch("t4", deltas)
	err := st.SendBatch(bg, b)
	var fe *FlushError
	if !errors.As(err, &fe) || !slices.Equal(fe.Failed, []int{2, 5}) || !strings.Contains(err.Error(), "WRONGTYPE") ||
		!errors.Is(err, counter.ErrBadBuckets) || errors.Is(err, counter.ErrUnavailable) {
		t.Fatalf("send: %v; want a FlushError naming f2 (WRONGTYPE) and the bad delta (ErrBadBuckets), only them", err)
	}
	if !b.Confirmed() {
		t.Fatal("batch not confirmed; want the failures dropped")
	}
	if err := st.SendBatch(bg, b); err != nil {
		t.Fatalf("second send: %v; want nil (reported once)", err)
	}
	for i, c := range countsOf(st, deltas[:5], now) {
		if want := int64(i + 1); i != 2 && c != want {
			t.Fatalf("%s counts %d; want %d", deltas[i].Key, c, want)
		}
	}
}

// A reset is ordered with the adds around it, from the in-memory store to Redis: incr,
// reset, incr before one drain leaves Redis with only the last incr; a reset of a
// counter no longer in memory deletes it in Redis.
func TestResetOrderedThroughRedis(t *testing.T) {
	_, st := startStore(t)
	mem := newMem(leaparray.WithDeltas())
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	flush := func() {
		t.Helper()
		var ds []Delta
		for _, d := range mem.Drain(nil) {
			ds = append(ds, Delta{Key: d.Key, Spec: d.Spec, Buckets: d.Buckets, Reset: d.Reset})
		}
		if err := st.SendBatch(bg, st.NewBatch("t5", ds)); err != nil {
			t.Fatal(err)
		}
	}
	mem.Incr("k", sp, 5, now)
	mem.Incr("away", sp, 4, now)
	flush()
	mem.Incr("k", sp, 2, now+1000)
	mem.Reset("k", sp, now+1500)
	mem.Incr("k", sp, 3, now+2000)
	mem.Evict(func(k string) bool { return k == "away" })
	mem.Reset("away", sp, now+2000)
	flush()
	got, err := st.Load(bg, "k", sp, now+2000)
	if want := []leaparray.Bucket{{Index: sp.Bucket(now + 2000), Count: 3}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("k in Redis: %v (%v); want %v, the incr after the reset only", got, err, want)
	}
	if existed, err := st.Reset(bg, "away", sp, now+2000); err != nil || existed {
		t.Fatalf("away in Redis: existed %v (%v); want deleted", existed, err)
	}
}

// A batch of new counters, a key flood's write-behind, allocates about one object per
// counter for its key and two for its arguments, and nothing that grows by copying: its
// garbage sets the node's collector headroom while the flood drains (issue 49). Before,
// 6.1 objects a counter (a map and slices grown by appending, go-redis's copy of every
// command); BenchmarkNewBatch has the bytes.
func TestNewBatchAllocatesLittlePerCounter(t *testing.T) {
	_, st := startStore(t)
	deltas := floodDeltas(8192)
	allocs := testing.AllocsPerRun(5, func() { st.NewBatch("alloc", deltas) })
	if per := allocs / float64(len(deltas)); per > 3.5 {
		t.Fatalf("NewBatch of %d new counters: %.2f allocations a counter; want at most 3.5", len(deltas), per)
	}
}

// floodDeltas is n deltas of a key flood: n counters, one increment each.
func floodDeltas(n int) []Delta {
	sp := spec(60_000, 10)
	now := int64(1_700_000_000_000)
	deltas := make([]Delta, n)
	for i, k := range benchKeys(n) {
		deltas[i] = Delta{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: 1}}}
	}
	return deltas
}
