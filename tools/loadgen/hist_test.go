package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Buckets tile the values with no gap or overlap, and index inverts bounds.
func TestHistBucketsTile(t *testing.T) {
	next := int64(0)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bounds(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d: index(%d) = %d, index(%d) = %d", i, lo, index(lo), hi, index(hi))
		}
		if hi < 0 || i == histBuckets-1 {
			break // the last bucket reaches past int64
		}
		next = hi + 1
	}
}

// A bucket is at most 1/32 of its values wide.
func TestHistPrecision(t *testing.T) {
	for _, v := range []int64{0, 63, 64, 1000, 123_456, 1e9, 3e12} {
		lo, hi := bounds(index(v))
		if v < lo || v > hi {
			t.Fatalf("%d outside its bucket [%d, %d]", v, lo, hi)
		}
		if float64(hi-lo) > float64(lo)/subCount {
			t.Fatalf("bucket of %d is [%d, %d]: wider than 1/%d", v, lo, hi, subCount)
		}
	}
}

// Quantiles match the exact ones of a sample within the bucket precision.
func TestHistQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Hist
	var vals []int64
	for range 100_000 {
		v := int64(r.ExpFloat64() * 200_000) // microseconds-scale latencies, long tail
		vals = append(vals, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := int64(h.Quantile(q))
		if got < exact || float64(got-exact) > float64(exact)/subCount+1 {
			t.Fatalf("q%v = %d, exact %d", q, got, exact)
		}
	}
	if h.Quantile(1) != time.Duration(vals[len(vals)-1]) || h.Max() != time.Duration(vals[len(vals)-1]) {
		t.Fatalf("q1 %v, max %v, want %d", h.Quantile(1), h.Max(), vals[len(vals)-1])
	}
}

func TestHistMergeAndEmpty(t *testing.T) {
	var a, b, empty Hist
	if empty.Quantile(0.5) != 0 {
		t.Fatal("empty histogram has a median")
	}
	a.Record(10)
	b.Record(1000)
	b.Record(-5)
	a.Merge(&b)
	if a.Count() != 3 || a.Quantile(0.34) != 10 || a.Max() != 1000 || a.Quantile(0.1) != 0 {
		t.Fatalf("merged: count %d q.34 %v max %v q.1 %v", a.Count(), a.Quantile(0.34), a.Max(), a.Quantile(0.1))
	}
}

func TestHistRecordDoesNotAllocate(t *testing.T) {
	var h Hist
	if n := testing.AllocsPerRun(100, func() { h.Record(12345) }); n != 0 {
		t.Fatalf("%v allocations per Record", n)
	}
}
