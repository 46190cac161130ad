package backoff

import (
	"testing"
	"time"
)

func TestNextDoublesUpToMax(t *testing.T) {
	p := Policy{Initial: 10 * time.Millisecond, Max: 35 * time.Millisecond}
	var got []time.Duration
	for d := p.Next(0); len(got) < 4; d = p.Next(d) {
		got = append(got, d)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("wait %d: got %v; want %v", i, got[i], want[i])
		}
	}
}
