package node

import (
	"math"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Each runtime bucket counts at every bound at or above its end, and in the total.
func TestGCPauseCumulate(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 1e-6, 1.5e-6, 2e-6, 3e-6, 4e-6, math.Inf(1)},
		Counts:  []uint64{0, 5, 1, 2, 3, 4, 6},
	}
	bounds := []float64{2e-6, 4e-6}
	count, sum, cum := cumulate(h, bounds)
	if count != 21 {
		t.Fatalf("count %d, want 21", count)
	}
	if cum[2e-6] != 8 || cum[4e-6] != 15 {
		t.Fatalf("cumulative %v, want 2e-6:8 4e-6:15", cum)
	}
	want := 5*0.5e-6 + 1*1.25e-6 + 2*1.75e-6 + 3*2.5e-6 + 4*3.5e-6 + 6*4e-6
	if math.Abs(sum-want) > 1e-12 {
		t.Fatalf("sum %g, want %g", sum, want)
	}
}

// The bounds are the powers of two from 2^10 to 2^30 ns, the runtime's own boundaries.
func TestGCPauseBoundsArePowersOfTwo(t *testing.T) {
	if len(gcPauseBounds) != 21 || gcPauseBounds[0] != 1024e-9 || gcPauseBounds[20] != float64(1<<30)/1e9 {
		t.Fatalf("bounds %v", gcPauseBounds)
	}
}

// After a collection both histograms have counted at least its pauses.
func TestGCPauseCollectors(t *testing.T) {
	runtime.GC()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newGCPauseCollectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"leapcount_gc_pause_seconds": gcPauseMetric, "leapcount_gc_pause_stopping_seconds": gcStoppingMetric}
	if len(mfs) != len(want) {
		t.Fatalf("gathered %v", mfs)
	}
	for _, mf := range mfs {
		source, ok := want[mf.GetName()]
		if !ok || !strings.Contains(mf.GetHelp(), source) {
			t.Fatalf("%s: help %q", mf.GetName(), mf.GetHelp())
		}
		if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n < 2 {
			t.Fatalf("%s: %d pauses after runtime.GC, want at least its two", mf.GetName(), n)
		}
	}
}
