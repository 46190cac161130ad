package benchharness

import (
	"strings"
	"testing"
	"time"
)

func result(id string, rate float64, cpuPerOp, p99 time.Duration) *sideResult {
	r := &sideResult{side: &side{id: id, name: id}, rates: []float64{rate * 0.9, rate * 1.1}, ops: 100_000}
	r.serverCPU = cpuPerOp * time.Duration(r.ops)
	for i := range 100 {
		if i < 97 {
			r.lat.Record(p99 / 2)
		} else {
			r.lat.Record(p99) // the slowest 3%: the p99
		}
	}
	return r
}

func syntheticReport() *Report {
	g := &groupResult{group: &group{id: "p1/uniform/unpinned", baseline: "redis-incr"}, sides: []*sideResult{
		result("redis-incr", 100_000, 7*time.Microsecond, 900*time.Microsecond),
		result("redis-hash", 40_000, 20*time.Microsecond, 2*time.Millisecond),
		result("sw-incr-1", 110_000, 10*time.Microsecond, 800*time.Microsecond),
		result("sw-incr-3", 60_000, 20*time.Microsecond, 3*time.Millisecond),
		result("http-allow-1", 50_000, 25*time.Microsecond, time.Millisecond),
	}}
	mem := &memResult{c: memCase{n: 1000, shape: full60s},
		lc:    lcMemory{baseRSS: 0, rss: 60_000},
		redis: redisMemory{baseRSS: 0, rss: 100_000, used: 90_000},
		gc: &gcResult{steady: pauseSummary{count: 5, p99: 300 * time.Microsecond, p99Lo: 262144, p99Hi: 524288,
			p99Known: true, anyData: true}}}
	return &Report{groups: []*groupResult{g}, mem: []*memResult{mem}}
}

func findTarget(t *testing.T, rows []targetRow, prefix string) targetRow {
	t.Helper()
	for _, r := range rows {
		if strings.HasPrefix(r.name, prefix) {
			return r
		}
	}
	t.Fatalf("no target %q", prefix)
	return targetRow{}
}

// Each target compares the right sides of the right group and says PASS or MISS;
// what the run did not measure says so.
func TestTargets(t *testing.T) {
	rows := syntheticReport().targets()
	for _, c := range []struct{ prefix, status, got string }{
		{"SW.INCR unpipelined vs Redis INCR, nothing", "PASS", "1.10x (110.0k vs 100.0k ops/s)"},
		{"SW.INCR unpipelined vs Redis + Lua", "PASS", "2.75x"},
		{"SW.INCR unpipelined vs Redis INCR, per core", "-", notMeasured},
		{"HTTP /v1/allow: server CPU per request, nothing", "PASS", "25.0 µs"},
		{"Forwarding", "MISS", "2.00x (20.0 µs vs 10.0 µs"},
		{"Memory, 1k counters, each touched once", "PASS", "0.60x"},
		{"GC pause p99 with 1k", "PASS", "≈ 300 µs"},
		{"p99 latency, SW.INCR", "PASS", "800 µs"},
		{"--redis, new keys, unpipelined", "-", notMeasured},
	} {
		r := findTarget(t, rows, c.prefix)
		if r.status != c.status || !strings.HasPrefix(r.got, c.got) {
			t.Errorf("%s: %s %q, want %s %q", r.name, r.status, r.got, c.status, c.got)
		}
	}
}

// The report renders every section from the same figures.
func TestMarkdown(t *testing.T) {
	md := syntheticReport().Markdown()
	for _, want := range []string{"## Machine", "## Targets (issues 10 and 24)", "## How it measures",
		"| redis-incr | 100.0k | 90.0k / 110.0k | 1.00x |", "## Memory", "### GC pauses with 1k live counters",
		"## Figures behind design choices"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestBoundStatus(t *testing.T) {
	ms := time.Millisecond
	if boundStatus(ms/4, ms/2, ms) != "PASS" || boundStatus(ms, 2*ms, ms) != "MISS" || boundStatus(ms/2, 2*ms, ms)[0] != '?' {
		t.Fatal("boundStatus")
	}
}

func TestMedian(t *testing.T) {
	if median([]float64{3, 1, 2}) != 2 || median([]float64{4, 1}) != 2.5 || median(nil) != 0 {
		t.Fatal("median")
	}
}
