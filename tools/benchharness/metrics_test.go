package benchharness

import (
	"math"
	"testing"
	"time"
)

const page = `# HELP leapcount_counters Counters held in memory by this node.
# TYPE leapcount_counters gauge
leapcount_counters 1e+06
leapcount_store_bytes 9.4e+07
leapcount_gc_pause_seconds_bucket{le="0.001048576"} 10
leapcount_gc_pause_seconds_bucket{le="0.000131072"} 4
leapcount_gc_pause_seconds_bucket{le="0.000262144"} 8
leapcount_gc_pause_seconds_bucket{le="+Inf"} 10
leapcount_gc_pause_seconds_count 10
`

func TestParseMetrics(t *testing.T) {
	m := parseMetrics(page)
	if m["leapcount_counters"] != 1e6 || m["leapcount_store_bytes"] != 9.4e7 {
		t.Fatalf("%v", m)
	}
	h := m.histogramOf("leapcount_gc_pause_seconds")
	if len(h.les) != 4 || h.les[0] != 0.000131072 || !math.IsInf(h.les[3], 1) || h.counts[1] != 8 || h.total() != 10 {
		t.Fatalf("%+v", h)
	}
}

// Quantiles interpolate within their bucket and name it; a difference of two scrapes
// holds what happened between them.
func TestHistogramQuantile(t *testing.T) {
	h := parseMetrics(page).histogramOf("leapcount_gc_pause_seconds")
	est, lo, hi, ok := h.quantile(0.5) // rank 5: the second bucket, 1 of its 4
	if !ok || lo != 0.000131072 || hi != 0.000262144 || math.Abs(est-(lo+(hi-lo)/4)) > 1e-12 {
		t.Fatalf("p50 %v in (%v, %v]", est, lo, hi)
	}
	if _, lo, hi, _ := h.quantile(0.99); lo != 0.000262144 || hi != 0.001048576 {
		t.Fatalf("p99 in (%v, %v]", lo, hi)
	}
	earlier := histogram{les: h.les, counts: []float64{4, 8, 8, 8}}
	d := h.minus(earlier)
	if d.total() != 2 {
		t.Fatalf("difference %+v", d)
	}
	if _, lo, _, _ := d.quantile(0.5); lo != 0.000262144 {
		t.Fatalf("the two later pauses are not in the third bucket: %v", lo)
	}
	if _, _, _, ok := (histogram{}).quantile(0.5); ok {
		t.Fatal("an empty histogram has a quantile")
	}
}

func TestPauseSummary(t *testing.T) {
	s := summarizePauses(parseMetrics(page).histogramOf("leapcount_gc_pause_seconds"))
	if s.count != 10 || !s.p99Known || s.p99Hi != 1048576*time.Nanosecond || s.maxHi != 1048576*time.Nanosecond {
		t.Fatalf("%+v", s)
	}
	if summarizePauses(histogram{}).String() != "no GC pauses" {
		t.Fatal("empty summary")
	}
}
