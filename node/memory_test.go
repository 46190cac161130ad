package node

import (
	"errors"
	"os"
	"testing"
	"time"
)

// Memory goes back to the OS once the store has fallen by a quarter and at least 64 MiB
// since its high, after the fall has settled (a pass of 10 sweeps freed under 8 MiB),
// and at most once a minute.
func TestMemReturnPolicy(t *testing.T) {
	const mib = 1 << 20
	m := memReturn{every: time.Minute, minFall: 64 * mib}
	at := time.Unix(1_700_000_000, 0)
	step := func(held int64, after time.Duration, want bool, why string) {
		t.Helper()
		at = at.Add(after)
		if got := m.after(held*mib, at); got != want {
			t.Fatalf("%d MiB (%s): got %v; want %v", held, why, got, want)
		}
	}
	step(40, 0, false, "growing")
	step(400, time.Second, false, "growing")
	for held := int64(390); held >= 150; held -= 10 { // 10 MiB a sweep: a slow fall
		step(held, time.Second, false, "falling 100 MiB a pass")
	}
	for range 9 {
		step(150, time.Second, false, "the pass still saw the fall")
	}
	step(150, time.Second, true, "a pass without a fall, 250 MiB below the high")
	step(150, time.Second, false, "no fall since")
	step(400, time.Second, false, "a new flood")
	for range 10 {
		step(100, time.Second, false, "fallen, settling")
	}
	step(100, time.Second, false, "settled, but memory went back under a minute ago")
	step(100, time.Minute, true, "settled, a minute later")
	step(160, time.Minute, false, "growing")
	for range 20 {
		step(100, time.Second, false, "settled, 60 MiB below: under 64 MiB")
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
