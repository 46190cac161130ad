package benchharness

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metrics are the samples of a Prometheus text page, by series ("name" or
// `name{label="v"}` as written).
type metrics map[string]float64

func parseMetrics(text string) metrics {
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// histogram is a Prometheus histogram's cumulative buckets, ascending.
type histogram struct {
	les    []float64 // upper bounds, +Inf last
	counts []float64 // cumulative counts
}

// histogramOf reads the buckets of histogram name (with no other labels than le).
func (m metrics) histogramOf(name string) histogram {
	var h histogram
	prefix := name + `_bucket{le="`
	type b struct{ le, n float64 }
	var bs []b
	for k, v := range m {
		if s, ok := strings.CutPrefix(k, prefix); ok {
			le, err := strconv.ParseFloat(strings.TrimSuffix(s, `"}`), 64)
			if err == nil {
				bs = append(bs, b{le, v})
			}
		}
	}
	slices.SortFunc(bs, func(x, y b) int { return cmpFloat(x.le, y.le) })
	for _, x := range bs {
		h.les = append(h.les, x.le)
		h.counts = append(h.counts, x.n)
	}
	return h
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// minus is h's counts less an earlier scrape's: what happened between the two.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{les: h.les, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(earlier.counts) {
			out.counts[i] -= earlier.counts[i]
		}
	}
	return out
}

func (h histogram) total() float64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile is q's estimate (linear within its bucket, as PromQL's histogram_quantile)
// and the bucket it lies in: (lo, hi]. ok is false with no observations.
func (h histogram) quantile(q float64) (est, lo, hi float64, ok bool) {
	total := h.total()
	if total == 0 {
		return 0, 0, 0, false
	}
	rank := q * total
	prevLe, prevN := 0.0, 0.0
	for i, n := range h.counts {
		if n >= rank && n > prevN {
			le := h.les[i]
			if math.IsInf(le, 1) {
				return prevLe, prevLe, le, true // past the last bound: say where it starts
			}
			return prevLe + (le-prevLe)*(rank-prevN)/(n-prevN), prevLe, le, true
		}
		prevLe, prevN = h.les[i], n
	}
	return prevLe, prevLe, prevLe, true
}

// pauseSummary is a text like "12 pauses: p50 ≈ 90 µs, p99 ≈ 410 µs (in 262-524 µs)".
type pauseSummary struct {
	count             int
	p50, p99, p99Hi   time.Duration
	p99Lo, maxHi      time.Duration
	p99Known, anyData bool
}

func summarizePauses(h histogram) pauseSummary {
	s := pauseSummary{count: int(h.total())}
	if p50, _, _, ok := h.quantile(0.5); ok {
		s.anyData = true
		s.p50 = secs(p50)
	}
	if est, lo, hi, ok := h.quantile(0.99); ok {
		s.p99, s.p99Lo, s.p99Hi, s.p99Known = secs(est), secs(lo), secs(hi), true
	}
	if _, _, hi, ok := h.quantile(1); ok {
		s.maxHi = secs(hi)
	}
	return s
}

func secs(f float64) time.Duration {
	if math.IsInf(f, 0) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(f * float64(time.Second))
}

func (s pauseSummary) String() string {
	if !s.anyData {
		return "no GC pauses"
	}
	return fmt.Sprintf("%d pauses: p50 ≈ %s, p99 ≈ %s (in %s–%s], max ≤ %s", s.count,
		fmtDur(s.p50), fmtDur(s.p99), fmtDur(s.p99Lo), fmtDur(s.p99Hi), fmtDur(s.maxHi))
}
