package fallback

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// Two halves of the traffic, each in its own counter, merged into a third counter give
// the counter of the whole traffic.
func TestMergeSnapshotsEqualsWholeTraffic(t *testing.T) {
	_, st := startStore(t)
	s := seed(t)
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 7))
	sp := spec(10_000, 10)
	whole := newMem()
	now := int64(1_700_000_000_000)
	for range 400 {
		now += rng.Int64N(300)
		n := 1 + rng.Int64N(5)
		whole.Incr("k", sp, n, now)
		half := "half" + strconv.Itoa(rng.IntN(2))
		if _, err := st.Incr(bg, half, sp, n, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, half := range []string{"half0", "half1"} {
		bs, err := st.Load(bg, half, sp, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Merge(bg, "merged", sp, bs, now); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Load(bg, "merged", sp, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := whole.Snapshot("k", sp, now); !reflect.DeepEqual(got, want) {
		t.Fatalf("merged buckets = %v; want %v", got, want)
	}
	c, err := st.Count(bg, "merged", sp, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := whole.Count("k", sp, now); c != want {
		t.Fatalf("merged count = %d; want %d", c, want)
	}
}

// A batch writes many counters in pipelined chunks; each lands as Merge would; a bad
// delta fails alone and names its counter.
func TestBatchManyCounters(t *testing.T) {
	_, st := startStore(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	mem := leaparray.NewStore()
	var deltas []Delta
	for i := range 2*FlushChunk + 17 {
		key := "c" + strconv.Itoa(i)
		bs := []leaparray.Bucket{{Index: sp.Bucket(now) - int64(i%3), Count: uint64(i%5 + 1)}, {Index: sp.Bucket(now), Count: 1}}
		mem.Merge(key, sp, bs)
		deltas = append(deltas, Delta{Key: key, Spec: sp, Buckets: bs})
	}
	deltas = append(deltas, Delta{Key: "bad", Spec: spec(10, 3), Buckets: []leaparray.Bucket{{Index: 1, Count: 1}}},
		Delta{Key: "empty", Spec: sp})
	err := sendOnce(st, deltas)
	var fe *FlushError
	if !errors.As(err, &fe) || !slices.Equal(fe.Failed, []int{len(deltas) - 2}) ||
		!strings.Contains(err.Error(), `"bad"`) || !errors.Is(err, counter.ErrBadBuckets) {
		t.Fatalf("send error = %v; want a FlushError naming only the bad counter (index %d)", err, len(deltas)-2)
	}
	for i, d := range deltas[:len(deltas)-2] {
		got, err := st.Load(bg, d.Key, sp, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := mem.Snapshot(d.Key, sp, now); !reflect.DeepEqual(got, want) {
			t.Fatalf("delta %d: buckets %v; want %v", i, got, want)
		}
	}
	if ok, _ := st.Reset(bg, "empty", sp, now); ok {
		t.Fatal("an empty delta created its counter")
	}
}
