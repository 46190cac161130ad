package node

import (
	"math"
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// The runtime's record of every stop-the-world pause for garbage collection, and of
// the part of each spent stopping: waiting for every goroutine to reach a safe point,
// which grows when the OS does not run the process's threads (an overloaded machine).
// The Go collector's go_gc_duration_seconds is a summary of recent pauses (min,
// quartiles, max), which cannot give a p99, and its runtime histograms are cut into
// powers of ten (100 µs, 1 ms, ...), too coarse to tell 300 µs from 900 µs. These
// histograms keep the runtime's counts at powers of two, 1 µs to 1 s.
const (
	gcPauseMetric    = "/sched/pauses/total/gc:seconds"
	gcStoppingMetric = "/sched/pauses/stopping/gc:seconds"
)

// gcPauseBounds are the upper bounds of the histograms: 2^10 ns (1.024 µs) to 2^30 ns
// (1.07 s), every power of two. The runtime's own buckets split each power of two into
// four, so none straddles a bound and the counts at these bounds are exact.
var gcPauseBounds = func() []float64 {
	var b []float64
	for k := 10; k <= 30; k++ {
		b = append(b, float64(int64(1)<<k)/1e9)
	}
	return b
}()

// runtimeHistogram exposes one runtime/metrics time histogram, read at each scrape.
type runtimeHistogram struct {
	metric string
	desc   *prometheus.Desc
}

// newGCPauseCollectors are leapcount_gc_pause_seconds (whole pauses) and
// leapcount_gc_pause_stopping_seconds (their stopping part).
func newGCPauseCollectors() []prometheus.Collector {
	const tail = "), in powers of two from 1 µs to 1 s; the sum is estimated from the buckets."
	return []prometheus.Collector{
		&runtimeHistogram{metric: gcPauseMetric, desc: prometheus.NewDesc("leapcount_gc_pause_seconds",
			"Stop-the-world pauses for garbage collection since the process started (runtime/metrics "+gcPauseMetric+tail, nil, nil)},
		&runtimeHistogram{metric: gcStoppingMetric, desc: prometheus.NewDesc("leapcount_gc_pause_stopping_seconds",
			"Of each GC pause, the time spent stopping the world: waiting for goroutines to reach a safe point, "+
				"long when the OS does not run the process's threads (runtime/metrics "+gcStoppingMetric+tail, nil, nil)},
	}
}

func (c *runtimeHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *runtimeHistogram) Collect(ch chan<- prometheus.Metric) {
	s := []metrics.Sample{{Name: c.metric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return // a runtime without this metric
	}
	count, sum, cum := cumulate(s[0].Value.Float64Histogram(), gcPauseBounds)
	ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, cum)
}

// cumulate turns a runtime histogram (bucket i is [Buckets[i], Buckets[i+1])) into
// Prometheus form: the total count, an estimated sum (each bucket at its midpoint, its
// finite end when the other is infinite) and, for each bound, the count of buckets
// that end at or below it.
func cumulate(h *metrics.Float64Histogram, bounds []float64) (uint64, float64, map[float64]uint64) {
	cum := make(map[float64]uint64, len(bounds))
	for _, b := range bounds {
		cum[b] = 0
	}
	var count uint64
	var sum float64
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		count += n
		sum += float64(n) * mid(lo, hi)
		for _, b := range bounds {
			// The runtime and gcPauseBounds compute the same powers of two, perhaps
			// rounded apart in the last bit: a bucket that ends within that of a bound
			// ends at it.
			if hi <= b*(1+1e-12) {
				cum[b] += n
			}
		}
	}
	return count, sum, cum
}

func mid(lo, hi float64) float64 {
	switch {
	case math.IsInf(lo, -1):
		return max(hi, 0)
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}
