package fallback

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

// primed writes counts[k] to each counter k in now's bucket, confirmed.
func primed(t *testing.T, st *Store, sp leaparray.Spec, now int64, counts map[string]uint64) {
	t.Helper()
	var ds []Delta
	for k, n := range counts {
		ds = append(ds, Delta{Key: k, Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: n}}})
	}
	if err := st.SendBatch(bg, st.NewBatch("prime", ds)); err != nil {
		t.Fatal(err)
	}
}

func wantCount(t *testing.T, st *Store, key string, sp leaparray.Spec, now, want int64, why string) {
	t.Helper()
	c, err := st.Count(bg, key, sp, now)
	if err != nil || c != want {
		t.Errorf("%s counts %d (%v); want %d: %s", key, c, err, want, why)
	}
}

func lateKeys(ds []Delta) map[string]bool {
	out := map[string]bool{}
	for _, d := range ds {
		out[d.Key] = true
	}
	return out
}

// A reset with a deadline applies only while Redis's clock is before it: past it,
// Redis merges the buckets without the reset and skips a Base whole, and the send
// reports both (LateResets). Answered at once; and run late, by a Redis that hung
// while its writer's deadline passed (the write on the wire that its writer could not
// recall), the send again finding it applied: then every reset with a deadline in the
// call is reported, as none is known to have applied.
func TestResetAppliesOnlyBeforeItsDeadline(t *testing.T) {
	srv := testredis.Start(t)
	st := open(t, srv.URL(), shortTimeouts(Config{BreakerFailures: -1}))
	check := open(t, srv.URL(), Config{})
	sp := spec(60_000, 60)
	now := int64(1_700_000_000_000)
	bucket := func(n uint64) []leaparray.Bucket { return []leaparray.Bucket{{Index: sp.Bucket(now), Count: n}} }

	t.Run("answered", func(t *testing.T) {
		primed(t, st, sp, now, map[string]uint64{"a/late": 5, "a/base": 4, "a/on-time": 3, "a/plain": 6})
		before, err := check.Time(bg)
		if err != nil {
			t.Fatal(err)
		}
		b := st.NewBatch("w1", []Delta{
			{Key: "a/late", Spec: sp, Buckets: bucket(2), Reset: true, ResetBy: before - 1},
			{Key: "a/base", Spec: sp, Buckets: bucket(9), Reset: true, Base: true, ResetBy: before - 1},
			{Key: "a/on-time", Spec: sp, Buckets: bucket(1), Reset: true, ResetBy: before + int64(time.Hour/time.Microsecond)},
			{Key: "a/plain", Spec: sp, Buckets: bucket(1), Reset: true},
		})
		if err := st.SendBatch(bg, b); err != nil {
			t.Fatal(err)
		}
		after, _ := check.Time(bg)
		if rt := b.RedisTime(); rt < before || rt > after {
			t.Errorf("RedisTime %d; want Redis's clock as the call ran, in [%d, %d]", rt, before, after)
		}
		if got := lateKeys(b.LateResets()); len(got) != 2 || !got["a/late"] || !got["a/base"] {
			t.Errorf("late resets %v; want a/late and a/base", got)
		}
		if got := b.LateResets(); len(got) != 0 {
			t.Errorf("late resets reported again: %v", got)
		}
		// Its reply lost, the call sent again is found applied before, as Redis's clock
		// reads before the on-time deadline and past the others.
		loseReplies(b)
		if err := st.SendBatch(bg, b); err != nil {
			t.Fatal(err)
		}
		if got := lateKeys(b.LateResets()); len(got) != 2 || !got["a/late"] || !got["a/base"] {
			t.Errorf("sent again, late resets %v; want a/late and a/base (not a/on-time: its deadline is ahead)", got)
		}
		wantCount(t, st, "a/late", sp, now, 7, "its buckets merged without the reset")
		wantCount(t, st, "a/base", sp, now, 4, "a Base past its deadline is skipped")
		wantCount(t, st, "a/on-time", sp, now, 1, "reset in time")
		wantCount(t, st, "a/plain", sp, now, 1, "a reset without a deadline")
	})

	t.Run("run late", func(t *testing.T) {
		primed(t, st, sp, now, map[string]uint64{"b/late": 5, "b/base": 4, "b/plain": 6})
		// An idle connection, so that the pipeline is written before Redis hangs.
		testredis.Poll(t, 20*time.Second, "a connection", func() error {
			_, err := st.Count(bg, "b/late", sp, now)
			return err
		})
		start, err := check.Time(bg)
		if err != nil {
			t.Fatal(err)
		}
		by := start + int64(300*time.Millisecond/time.Microsecond)
		b := st.NewBatch("w2", []Delta{
			{Key: "b/late", Spec: sp, Buckets: bucket(2), Reset: true, ResetBy: by},
			{Key: "b/base", Spec: sp, Buckets: bucket(9), Reset: true, Base: true, ResetBy: by},
			{Key: "b/plain", Spec: sp, Buckets: bucket(1)},
		})
		srv.Pause()
		err = st.SendBatch(bg, b)
		// Redis's clock is this machine's: wait until it is past the deadline.
		testredis.Poll(t, 20*time.Second, "the deadline past", func() error {
			if time.Now().UnixMicro() <= by+int64(50*time.Millisecond/time.Microsecond) {
				return errors.New("not yet")
			}
			return nil
		})
		srv.Resume()
		if !errors.Is(err, counter.ErrUnavailable) || !b.InDoubt() {
			t.Fatalf("send to a hung Redis: %v, in doubt %v; want ErrUnavailable, in doubt", err, b.InDoubt())
		}
		if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
			t.Fatalf("sent again: %v, confirmed %v", err, b.Confirmed())
		}
		if got := lateKeys(b.LateResets()); len(got) != 2 || !got["b/late"] || !got["b/base"] {
			t.Errorf("late resets %v; want b/late and b/base (found applied before: not known to have reset)", got)
		}
		wantCount(t, st, "b/late", sp, now, 7, "run past its deadline: merged without the reset")
		wantCount(t, st, "b/base", sp, now, 4, "run past its deadline: skipped")
		wantCount(t, st, "b/plain", sp, now, 7, "an add, once")
	})
}

// What a late reset leaves to send again: per counter whose last reset is late, that
// reset with the buckets of the counter's later deltas added, as a Base; nothing for a
// counter whose last reset applied in time, nor for one with no late reset.
func TestLateStatesFoldWhatFollowsALateReset(t *testing.T) {
	sp := spec(60_000, 60)
	d := func(key string, reset bool, counts ...uint64) Delta {
		var bs []leaparray.Bucket
		for j, c := range counts {
			bs = append(bs, leaparray.Bucket{Index: int64(100 + j), Count: c})
		}
		return Delta{Key: key, Spec: sp, Buckets: bs, Reset: reset, ResetBy: 7}
	}
	ds := []Delta{
		d("a", true, 1),     // 0: late
		d("b", true),        // 1: late, then a reset in time
		d("a", false, 2, 5), // 2
		d("c", false, 4),    // 3: no reset
		d("b", true, 3),     // 4: in time
		d("a", false, 1),    // 5
		d("e", true),        // 6: in time, then a late one
		d("e", true, 6),     // 7: late
	}
	late := map[int]bool{0: true, 1: true, 7: true}
	got := LateStates(ds, func(i int) bool { return late[i] })
	want := []Delta{
		{Key: "a", Spec: sp, Reset: true, Base: true, Buckets: []leaparray.Bucket{{Index: 100, Count: 4}, {Index: 101, Count: 5}}},
		{Key: "e", Spec: sp, Reset: true, Base: true, Buckets: []leaparray.Bucket{{Index: 100, Count: 6}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("LateStates = %+v\nwant %+v", got, want)
	}
	if ds[0].Buckets[0].Count != 1 {
		t.Errorf("LateStates changed the deltas it was given: %+v", ds[0])
	}
}
