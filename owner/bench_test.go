package owner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// discardSender accepts every Handoff and keeps nothing.
type discardSender struct{}

func (discardSender) Handoff(context.Context, string, *Handoff) error { return nil }

// BenchmarkIncrDuringRingChange measures what a ring change costs the ops on the
// partitions that stay: an owner holding n counters loses half its partitions (their
// counters leave memory and are handed on) while clients keep incrementing counters it
// keeps. It reports the latency of those increments, p50/p99/max, during the change
// and, for comparison, in the same run without one. Run it with -benchtime 1x: once
// moved, the counters are gone.
func BenchmarkIncrDuringRingChange(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("counters=%d", n), func(b *testing.B) {
			o, keep := benchOwner(b, n)
			quiet := measureIncr(o, keep, nil)
			if b.N > 1 {
				b.Fatal("run with -benchtime 1x: the counters moved are gone after the first change")
			}
			during := measureIncr(o, keep, func() {
				o.SetRing(ringOf("a", "b"))
				_ = o.WaitReleased(context.Background())
			})
			report(b, "quiet", quiet)
			report(b, "change", during)
		})
	}
}

func benchOwner(b *testing.B, n int) (*Owner, []string) {
	b.Helper()
	fl := newFakeLeases()
	o := New(Config{Self: "a", Writer: "a.bench", Store: leaparray.NewStore(), Leases: fl, Peers: PeersIO(discardSender{}),
		Now: func() int64 { return t0 }})
	o.SetRing(ringOf("a"))
	fl.grantAll()
	for i := 0; i < n; i++ {
		if _, err := o.cfg.Store.TryIncr(fmt.Sprintf("bench:%d", i), sp, 1, t0); err != nil {
			b.Fatal(err)
		}
	}
	two := ringOf("a", "b")
	keep := keysOf(two, "a", 1000)
	for _, k := range keep {
		do(o, incr(k, 1))
	}
	return o, keep
}

// measureIncr increments keep's counters from 4 goroutines while change runs (or for
// 200ms without one) and returns the latencies.
func measureIncr(o *Owner, keep []string, change func()) []time.Duration {
	done := make(chan struct{})
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			res := make([]counter.Result, 1)
			var mine []time.Duration
			for i := w; ; i++ {
				select {
				case <-done:
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
					return
				default:
				}
				op := []counter.Op{incr(keep[i%len(keep)], 1)}
				start := time.Now()
				counter.Do(context.Background(), o, op, res)
				mine = append(mine, time.Since(start))
				time.Sleep(20 * time.Microsecond) // clients that leave the CPU some room: latency, not throughput
			}
		}(w)
	}
	if change != nil {
		change()
	} else {
		time.Sleep(200 * time.Millisecond) // a span of quiet traffic to compare with
	}
	close(done)
	wg.Wait()
	return lat
}

func report(b *testing.B, what string, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.5), what+"-p50-µs")
	b.ReportMetric(at(0.99), what+"-p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds())/1e3, what+"-max-µs")
}
