package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// BenchmarkConverge starts 16, 32 and 64 members on loopback in one process, with the
// fast timings of the tests, each joining the first, and reports how long after the
// last one started every member saw all of them alive (ms-to-converge). Run it with
// -benchtime 1x: one cluster per size.
func BenchmarkConverge(b *testing.B) {
	for _, n := range []int{16, 32, 64} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				cs := []*cluster.Cluster{clustertest.Start(b, clustertest.Config(b, fmt.Sprintf("m%d-0", i)))}
				for j := 1; j < n; j++ {
					cs = append(cs, clustertest.Start(b, clustertest.Config(b, fmt.Sprintf("m%d-%d", i, j), cs[0].LocalAddr())))
				}
				start := time.Now()
				if err := wait.Until(2*time.Minute, func() error { return clustertest.Converged(cs...) }); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				for _, c := range cs {
					c.Shutdown()
				}
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-converge")
		})
	}
}
