package ring

import (
	"fmt"
	"testing"
)

func TestOwnerDoesNotAllocate(t *testing.T) {
	r := New(members(10), Config{})
	key := "user:12345:login"
	if got := testing.AllocsPerRun(1000, func() { r.Owner(key) }); got != 0 {
		t.Fatalf("Owner: got %v allocs/op; want 0", got)
	}
	b := []byte(key)
	if got := testing.AllocsPerRun(1000, func() { r.OwnerBytes(b) }); got != 0 {
		t.Fatalf("OwnerBytes: got %v allocs/op; want 0", got)
	}
}

var sink Member

func BenchmarkOwner(b *testing.B) {
	r := New(members(10), Config{})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:%d:api-key:%d", i%7, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = r.Owner(keys[i&1023])
		i++
	}
}

// BenchmarkNew times a ring's build, which a membership change pays, under both
// placements, and under matching with one partition a slot (node --partitions 16384).
func BenchmarkNew(b *testing.B) {
	for _, cfg := range []Config{{}, Consistent, {PartitionCount: 16384}} {
		for _, n := range []int{3, 16, 64} {
			ms := members(n)
			c := cfg.withDefaults()
			b.Run(fmt.Sprintf("%v/partitions=%d/members=%d", c.Placement, c.PartitionCount, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					New(ms, cfg)
				}
			})
		}
	}
}
