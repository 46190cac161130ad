package benchharness

import (
	"strings"
	"testing"
	"time"
)

// Each TLS side is set against its plain twin, by id.
func TestTLSCostTablePairsEachSideWithItsPlainTwin(t *testing.T) {
	mk := func(id string, rate float64, ops int64, cpuNs int64) *sideResult {
		return &sideResult{side: &side{id: id, name: id}, rates: []float64{rate}, ops: ops, serverCPU: time.Duration(cpuNs)}
	}
	g := &groupResult{sides: []*sideResult{
		mk("redis-incr", 1000, 100, 1000), mk("redis-incr-tls", 500, 100, 3000),
		mk("sw-incr", 800, 100, 2000), mk("sw-incr-tls", 600, 100, 2000),
	}}
	tab := tlsCostTable(g)
	for _, want := range []string{"| redis-incr-tls | 0.50x | 3.00x |", "| sw-incr-tls | 0.75x | 1.00x |"} {
		if !strings.Contains(tab, want) {
			t.Fatalf("no %q in:\n%s", want, tab)
		}
	}
	if strings.Contains(tab, "| redis-incr |") {
		t.Fatalf("a plain side has a row:\n%s", tab)
	}
}
