package fallback

import (
	"strconv"
	"testing"
	"time"

	"github.com/leapcount/leapcount/leaparray"
)

// One script call (one round trip) per counter delta: what a node pays per request when
// it answers from Redis.
func BenchmarkIncrOneScriptPerCall(b *testing.B) {
	_, st := startStore(b)
	sp := spec(60_000, 60)
	keys := benchKeys(1000)
	now := int64(1_700_000_000_000)
	i := 0
	start := time.Now()
	for b.Loop() {
		if _, err := st.Incr(bg, keys[i%len(keys)], sp, 1, now+int64(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	report(b, i, time.Since(start))
}

// The write-behind path: many counters' deltas merged per pipeline.
func BenchmarkFlushDeltas(b *testing.B) {
	for _, buckets := range []int{1, 10} {
		b.Run(strconv.Itoa(buckets)+"buckets", func(b *testing.B) {
			_, st := startStore(b)
			sp := spec(60_000, 60)
			now := int64(1_700_000_000_000)
			deltas := make([]Delta, FlushChunk)
			for i, k := range benchKeys(len(deltas)) {
				bs := make([]leaparray.Bucket, buckets)
				for j := range bs {
					bs[j] = leaparray.Bucket{Index: sp.Bucket(now) - int64(buckets-1-j), Count: 1}
				}
				deltas[i] = Delta{Key: k, Spec: sp, Buckets: bs}
			}
			n := 0
			start := time.Now()
			for b.Loop() {
				if err := st.FlushDeltas(bg, deltas); err != nil {
					b.Fatal(err)
				}
				n += len(deltas)
			}
			report(b, n, time.Since(start))
		})
	}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "bench:" + strconv.Itoa(i)
	}
	return keys
}

// report adds the cost per counter delta and the deltas (script calls) per second.
func report(b *testing.B, deltas int, d time.Duration) {
	if deltas == 0 {
		return
	}
	b.ReportMetric(float64(d.Nanoseconds())/float64(deltas), "ns/delta")
	b.ReportMetric(float64(deltas)/d.Seconds(), "deltas/s")
}
