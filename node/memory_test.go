package node

import (
	"errors"
	"os"
	"testing"
	"time"
)

// Memory goes back to the OS once the store has fallen by a quarter and at least 64 MiB
// since its high, after the fall has settled, and at most once a minute.
func TestMemReturnPolicy(t *testing.T) {
	const mib = 1 << 20
	m := memReturn{every: time.Minute, minFall: 64 * mib}
	at := time.Unix(1_700_000_000, 0)
	steps := []struct {
		held  int64
		after time.Duration
		want  bool
		why   string
	}{
		{40 * mib, 0, false, "growing"},
		{400 * mib, time.Second, false, "growing"},
		{300 * mib, time.Second, false, "falling by 100 MiB a sweep: not settled"},
		{150 * mib, time.Second, false, "still falling"},
		{148 * mib, time.Second, true, "settled 252 MiB below the high"},
		{148 * mib, time.Second, false, "no fall since"},
		{400 * mib, time.Second, false, "a new flood"},
		{100 * mib, time.Second, false, "falling"},
		{100 * mib, time.Second, false, "settled, but memory went back under a minute ago"},
		{100 * mib, time.Minute, true, "settled, a minute later"},
		{160 * mib, time.Minute, false, "growing"},
		{100 * mib, time.Second, false, "settled, 60 MiB below: under 64 MiB"},
		{100 * mib, time.Second, false, "still"},
	}
	for i, s := range steps {
		at = at.Add(s.after)
		if got := m.after(s.held, at); got != s.want {
			t.Fatalf("step %d (%d MiB, %s): got %v; want %v", i, s.held/mib, s.why, got, s.want)
		}
	}
}

// The memory limit is the cgroup's when one is set and below the machine's, else the
// machine's MemTotal.
func TestMemoryLimit(t *testing.T) {
	const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"
	total := int64(16384000) << 10
	cases := []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"v2 limit", map[string]string{cgroupV2Max: "1073741824\n", procMeminfo: meminfo}, 1 << 30, cgroupV2Max},
		{"v2 no limit", map[string]string{cgroupV2Max: "max\n", procMeminfo: meminfo}, total, procMeminfo},
		{"v1 limit", map[string]string{cgroupV1Max: "536870912\n", procMeminfo: meminfo}, 512 << 20, cgroupV1Max},
		{"v1 no limit", map[string]string{cgroupV1Max: "9223372036854771712\n", procMeminfo: meminfo}, total, procMeminfo},
		{"limit above the machine", map[string]string{cgroupV2Max: "68719476736000\n", procMeminfo: meminfo}, total, procMeminfo},
		{"cgroup only", map[string]string{cgroupV2Max: "1073741824\n"}, 1 << 30, cgroupV2Max},
		{"nothing", map[string]string{}, 0, ""},
	}
	for _, c := range cases {
		read := func(path string) ([]byte, error) {
			if v, ok := c.files[path]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such file")
		}
		got, from := MemoryLimit(read)
		if got != c.want || (c.from != "" && from != c.from) {
			t.Errorf("%s: got %d from %q; want %d from %q", c.name, got, from, c.want, c.from)
		}
	}
}

// The default --max-counters is a quarter of memory at CounterBytes a counter.
func TestDefaultMaxCounters(t *testing.T) {
	limit, _ := MemoryLimit(os.ReadFile)
	got, how := DefaultMaxCounters(256)
	t.Logf("memory %d MiB: --max-counters %d (%s)", limit>>20, got, how)
	if want := max(limit/4/512, minDefaultCounters); got != want {
		t.Errorf("got %d; want %d (a quarter of %d bytes at 512 bytes a counter)", got, want, limit)
	}
}
