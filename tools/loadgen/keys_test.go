package loadgen

import (
	"strings"
	"testing"
)

func drain(s KeyStream, max int) []string {
	var out []string
	buf := make([]byte, 0, 32)
	for len(out) < max {
		k, ok := s.Next(buf)
		if !ok {
			break
		}
		out = append(out, string(k))
	}
	return out
}

// Uniform keys stay in their space, reach all of a small one, differ by connection
// and repeat for the same seed.
func TestUniformKeys(t *testing.T) {
	u := Uniform{Prefix: "k:", N: 100, Seed: 7}
	seen := map[string]int{}
	for _, k := range drain(u.Stream(0, 4), 20_000) {
		if !strings.HasPrefix(k, "k:") || len(k) > 4 {
			t.Fatalf("key %q outside k:0..k:99", k)
		}
		seen[k]++
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct keys of 100", len(seen))
	}
	for k, n := range seen {
		if n < 100 || n > 300 { // 200 expected; a uniform draw is far inside this
			t.Fatalf("key %s drawn %d times of 20000", k, n)
		}
	}
	a, b := drain(u.Stream(1, 4), 50), drain(u.Stream(1, 4), 50)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatal("the same seed and connection drew other keys")
	}
	if strings.Join(a, ",") == strings.Join(drain(u.Stream(2, 4), 50), ",") {
		t.Fatal("two connections drew the same keys")
	}
}

// Unique keys never repeat, within a connection or across them.
func TestUniqueKeys(t *testing.T) {
	u := Unique{Prefix: "n:"}
	seen := map[string]bool{}
	for c := range 3 {
		for _, k := range drain(u.Stream(c, 3), 1000) {
			if seen[k] {
				t.Fatalf("key %q twice", k)
			}
			seen[k] = true
		}
	}
}

// A range is split across the connections, each key once, and then ends.
func TestRangeKeys(t *testing.T) {
	r := Range{Prefix: "m:", N: 10}
	var all []string
	for c := range 3 {
		all = append(all, drain(r.Stream(c, 3), 100)...)
	}
	if len(all) != 10 {
		t.Fatalf("%d keys, want 10: %v", len(all), all)
	}
	seen := map[string]bool{}
	for _, k := range all {
		seen[k] = true
	}
	for i := range 10 {
		if k := "m:" + string(rune('0'+i)); !seen[k] {
			t.Fatalf("%s missing from %v", k, all)
		}
	}
}

func TestKeyStreamsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, k := range []Keys{Uniform{Prefix: "k:", N: 100_000}, Unique{Prefix: "n:"}, Range{Prefix: "m:", N: 1 << 30}} {
		s := k.Stream(0, 1)
		if n := testing.AllocsPerRun(100, func() { buf, _ = s.Next(buf) }); n != 0 {
			t.Fatalf("%s: %v allocations per key", k, n)
		}
	}
}
