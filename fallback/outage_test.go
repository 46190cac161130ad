package fallback

import (
	"context"
	"errors"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"strconv"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// unavailableBound is how long a call may take to give up on a Redis that is gone or
// hung, with the default 200 ms timeouts (shortTimeouts; refused calls fail at once): a
// correctness bound (no call hangs), far above what it takes.
const unavailableBound = 2 * time.Second

// everyOp runs each of the store's calls once and returns their errors and durations
// by name.
func everyOp(st *Store, now int64) map[string]outcome {
	ctx := context.Background()
	sp := spec(10_000, 10)
	bs := []leaparray.Bucket{{Index: sp.Bucket(now), Count: 1}}
	out := map[string]outcome{}
	timed := func(name string, f func() error) {
		start := time.Now()
		err := f()
		out[name] = outcome{err, time.Since(start)}
	}
	timed("incr", func() error { _, err := st.Incr(ctx, "k", sp, 1, now); return err })
	timed("count", func() error { _, err := st.Count(ctx, "k", sp, now); return err })
	timed("allow", func() error { _, err := st.Allow(ctx, "k", sp, 10, 1, now); return err })
	timed("reset", func() error { _, err := st.Reset(ctx, "k", sp, now); return err })
	timed("merge", func() error { return st.Merge(ctx, "k", sp, bs, now) })
	timed("batch", func() error { return st.SendBatch(ctx, st.NewBatch("t", []Delta{{Key: "k", Spec: sp, Buckets: bs}})) })
	timed("load", func() error { _, err := st.Load(ctx, "k", sp, now); return err })
	timed("ping", func() error { return st.Ping(ctx) })
	timed("stamp", func() error { _, err := st.StampWritten(ctx, 16, []int{1}, now, "e"); return err })
	timed("written", func() error { _, err := st.Written(ctx, 16, []int{1}); return err })
	timed("mark late", func() error { return st.MarkLate(ctx, 16, []int{1}) })
	timed("late marks", func() error { _, _, err := st.LateMarks(ctx, 16, -1); return err })
	timed("fence", func() error { _, err := st.Reached(ctx, []Fence{{WriterKey: "lc:{k}:w", Seq: 1}}); return err })
	timed("pipeline", func() error { _, err := countAll(st, []CounterRef{{Key: "k", Spec: sp}}, now); return err })
	return out
}

type outcome struct {
	err  error
	took time.Duration
}

// wantUnavailable runs every call and wants each to fail with counter.ErrUnavailable
// within unavailableBound.
func wantUnavailable(t *testing.T, st *Store, why string) {
	t.Helper()
	for name, o := range everyOp(st, 1_700_000_000_000) {
		if !errors.Is(o.err, counter.ErrUnavailable) {
			t.Errorf("%s with Redis %s: err %v; want one wrapping counter.ErrUnavailable", name, why, o.err)
		}
		if o.took > unavailableBound {
			t.Errorf("%s with Redis %s took %v; want under %v", name, why, o.took, unavailableBound)
		}
	}
}

// wantWorking polls until every call succeeds again.
func wantWorking(t *testing.T, st *Store, why string) {
	t.Helper()
	testredis.Poll(t, 15*time.Second, "every call works after "+why, func() error {
		for name, o := range everyOp(st, 1_700_000_000_000) {
			if o.err != nil {
				return errors.New(name + ": " + o.err.Error())
			}
		}
		return nil
	})
}

// Redis stopped: every call fails fast with ErrUnavailable. Restarted (empty, without
// the scripts): calls work again, EVALSHA's NOSCRIPT making the store load the scripts.
func TestRedisStoppedThenRestarted(t *testing.T) {
	srv, st := startStore(t)
	if err := st.Ping(bg); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	wantUnavailable(t, st, "stopped")
	srv.Restart()
	rc := srv.Client(t)
	if ok := rc.ScriptExists(bg, scripts.mergeMany.Hash()).Val(); len(ok) != 1 || ok[0] {
		t.Fatalf("SCRIPT EXISTS merge_many after restart = %v; want [false]", ok)
	}
	wantWorking(t, st, "restart")
	for _, s := range loaded {
		if s == scripts.probe {
			continue // runs only with WaitReplicas (TestProbeFindsReplicasBack), not in everyOp
		}
		if ok := rc.ScriptExists(bg, s.Hash()).Val(); len(ok) != 1 || !ok[0] {
			t.Fatalf("SCRIPT EXISTS after the calls = %v; want [true] (reloaded)", ok)
		}
	}
}

// Redis hung (SIGSTOP: it accepts connections and never answers): every call gives up
// within the read timeout. Resumed: calls work again.
func TestRedisHungTimesOut(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), shortTimeouts(Config{}))
	wantWorking(t, st, "start")
	srv.Pause()
	wantUnavailable(t, st, "hung")
	srv.Resume()
	wantWorking(t, st, "resume")
}

// The pipelined paths (a batch, several scripts in one pipeline) load the scripts again
// after SCRIPT FLUSH and apply each call once.
func TestPipelineReloadsScripts(t *testing.T) {
	srv, st := startStore(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	bs := []leaparray.Bucket{{Index: sp.Bucket(now), Count: 2}}
	srv.Do(t, "SCRIPT", "FLUSH")
	if err := sendOnce(st, []Delta{{Key: "a", Spec: sp, Buckets: bs}, {Key: "b", Spec: sp, Buckets: bs}}); err != nil {
		t.Fatal(err)
	}
	srv.Do(t, "SCRIPT", "FLUSH")
	cmds, _ := st.runAll(bg, []call{st.incrCall("a", sp, 1, now), st.countCall("b", sp, now)})
	a, errA := decodeInt("incr", cmds[0])
	b, errB := decodeInt("count", cmds[1])
	if errA != nil || a != 3 || errB != nil || b != 2 {
		t.Fatalf("incr a, count b after SCRIPT FLUSH = %d (%v), %d (%v); want 3 and 2", a, errA, b, errB)
	}
}

// Open fails fast, with ErrUnavailable, when Redis is not there.
func TestOpenWithoutRedis(t *testing.T) {
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Open(bg, Config{URL: "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"})
	if !errors.Is(err, counter.ErrUnavailable) {
		t.Fatalf("Open on a closed port: %v; want ErrUnavailable", err)
	}
	if d := time.Since(start); d > unavailableBound {
		t.Fatalf("Open on a closed port took %v; want under %v", d, unavailableBound)
	}
}

// With Lazy, Open succeeds while Redis is down; calls fail until it is back, then work
// (the scripts loading on first use).
func TestLazyOpenBeforeRedis(t *testing.T) {
	srv := testredis.Start(t)
	srv.Stop()
	st := open(t, srv.URL(), Config{Lazy: true})
	wantUnavailable(t, st, "not started yet")
	srv.Restart()
	wantWorking(t, st, "start")
}
