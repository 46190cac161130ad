package leaparray

import "testing"

const t0 = 1_699_999_200_000 // an hour boundary, so a bucket boundary for every spec below

func TestContractExample(t *testing.T) {
	sp := Spec{WindowMs: 60_000, Buckets: 10} // L = 6s
	s := NewStore()
	steps := []struct {
		at   int64
		n    int64
		want int64
	}{
		{t0, 1, 1},
		{t0 + 5_999, 2, 3},         // same bucket
		{t0 + 6_000, 4, 7},         // next bucket
		{t0 + 59_999, 1, 8},        // last bucket of the first window
		{t0 + 60_000, 1, 6},        // bucket 0 (3) has left
		{t0 + 66_000, 1, 3},        // bucket 1 (4) has left
		{t0 + 10*60_000, 5, 5},     // a jump of many windows clears everything
		{t0 + 10*60_000 - 1, 1, 6}, // a step back acts at the head: nothing is lost
	}
	for i, st := range steps {
		if got := s.Incr("k", sp, st.n, st.at); got != st.want {
			t.Fatalf("step %d: incr at +%d: got %d; want %d", i, st.at-t0, got, st.want)
		}
	}
}

func TestAllowRetryAfter(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10} // L = 100ms
	s := NewStore()
	s.Incr("k", sp, 3, t0)     // bucket 0
	s.Incr("k", sp, 2, t0+350) // bucket 3
	d := s.Allow("k", sp, 5, 1, t0+420)
	want := Decision{Count: 5, Remaining: 0, RetryAfterMs: t0 + 1000 - (t0 + 420)}
	if d != want { // bucket 0 leaves at t0+1000; then 2+1 <= 5
		t.Fatalf("got %+v; want %+v", d, want)
	}
	d = s.Allow("k", sp, 5, 4, t0+420)
	want.RetryAfterMs = t0 + 1300 - (t0 + 420) // 2+4 > 5 until bucket 3 leaves too
	if d != want {
		t.Fatalf("got %+v; want %+v", d, want)
	}
	if d = s.Allow("k", sp, 5, 6, t0+420); d.RetryAfterMs != -1 {
		t.Fatalf("n > limit: got retry %d; want -1", d.RetryAfterMs)
	}
	if d = s.Allow("k", sp, 5, 1, t0+1000); !d.Allowed || d.Count != 3 || d.Remaining != 2 {
		t.Fatalf("after the wait: got %+v; want allowed, count 3, remaining 2", d)
	}
}

func TestDeniedAllowDoesNotCreate(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	d := s.Allow("k", sp, 0, 1, t0)
	if want := (Decision{RetryAfterMs: -1}); d != want {
		t.Fatalf("got %+v; want %+v", d, want)
	}
	if got := s.Len(); got != 0 {
		t.Fatalf("Len: got %d; want 0", got)
	}
}

func TestWideBuckets(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 2}
	const big = 1<<31 - 1
	want := s.Incr("k", sp, 1, t0-500) // a bucket before: a ring, not the one-bucket form
	for i := 0; i < 5; i++ {           // 5 × (2^31−1) overflows a uint32 bucket
		want += big
		if got := s.Incr("k", sp, big, t0); got != want {
			t.Fatalf("add %d: got %d; want %d", i, got, want)
		}
	}
	if got := tierOf(s, "k", sp); got != wide {
		t.Fatalf("after overflowing a narrow bucket: got tier %d; want %d", got, wide)
	}
	want--                     // the bucket before leaves the window
	s.Incr("other", sp, 1, t0) // a neighbour in another slab stays findable
	if got := s.Count("k", sp, t0+500); got != want {
		t.Fatalf("count in the next bucket: got %d; want %d", got, want)
	}
	if got := s.Count("other", sp, t0); got != 1 {
		t.Fatalf("neighbour: got %d; want 1", got)
	}
	if got := s.Count("k", sp, t0+1000); got != 0 {
		t.Fatalf("after the window: got %d; want 0", got)
	}
	if !s.Reset("k", sp, t0) || s.Reset("k", sp, t0) {
		t.Fatalf("reset of a wide counter: want true, then false")
	}
}

func TestSnapshotMergeIsAdditive(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10}
	whole, a, b := NewStore(), NewStore(), NewStore()
	for i := int64(0); i < 300; i++ {
		now := t0 + i*7
		whole.Incr("k", sp, i%5+1, now)
		if i%3 == 0 {
			a.Incr("k", sp, i%5+1, now)
		} else {
			b.Incr("k", sp, i%5+1, now)
		}
	}
	end := int64(t0 + 300*7)
	merged := NewStore()
	merged.Merge("k", sp, a.Snapshot("k", sp, end))
	merged.Merge("k", sp, b.Snapshot("k", sp, end))
	for at := end; at < end+1100; at += 50 {
		if got, want := merged.Count("k", sp, at), whole.Count("k", sp, at); got != want {
			t.Fatalf("count at +%d: got %d; want %d", at-end, got, want)
		}
	}
	if got := merged.Snapshot("unknown", sp, end); got != nil {
		t.Fatalf("snapshot of an unknown counter: got %v; want nil", got)
	}
}

func TestLeapArraySnapshotMerge(t *testing.T) {
	sp := Spec{WindowMs: 1000, Buckets: 10}
	a, _ := New(sp)
	a.Add(t0, 2)
	a.Add(t0+150, 3)
	a.Add(t0+990, 4)
	snap := a.Snapshot(t0 + 1050) // bucket 0 has left
	want := []Bucket{{Index: (t0 + 150) / 100, Count: 3}, {Index: (t0 + 990) / 100, Count: 4}}
	if len(snap) != len(want) || snap[0] != want[0] || snap[1] != want[1] {
		t.Fatalf("snapshot: got %v; want %v", snap, want)
	}
	b, _ := New(sp)
	b.Add(t0+200, 1)
	b.Merge(snap)
	if got := b.Count(t0 + 1050); got != 8 {
		t.Fatalf("merged count: got %d; want 8", got)
	}
}

func TestNegativeTimeAndBadSpec(t *testing.T) {
	s := NewStore()
	sp := Spec{WindowMs: 1000, Buckets: 10}
	if got := s.Incr("k", sp, 1, -150); got != 1 {
		t.Fatalf("incr before the epoch: got %d; want 1", got)
	}
	if got := s.Count("k", sp, -101); got != 1 {
		t.Fatalf("count in the same bucket: got %d; want 1", got)
	}
	if got := s.Incr("k", Spec{WindowMs: 10, Buckets: 3}, 1, t0); got != 0 {
		t.Fatalf("invalid spec: got %d; want 0 (ignored)", got)
	}
	if _, err := New(Spec{WindowMs: 0, Buckets: 1}); err == nil {
		t.Fatalf("New with a zero window: want an error")
	}
}
