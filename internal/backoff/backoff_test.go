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

// A factor other than 2 grows each wait by itself; one below 1 keeps every wait at
// Initial (envoyproxy/ratelimit's xDS backoff with its default factor, 0.5).
func TestNextGrowsByFactor(t *testing.T) {
	for _, c := range []struct {
		factor float64
		want   []time.Duration
	}{
		{1.5, []time.Duration{10 * time.Millisecond, 15 * time.Millisecond, 22500 * time.Microsecond, 33750 * time.Microsecond, 35 * time.Millisecond}},
		{0.5, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}},
	} {
		p := Policy{Initial: 10 * time.Millisecond, Max: 35 * time.Millisecond, Factor: c.factor}
		d := time.Duration(0)
		for i, want := range c.want {
			if d = p.Next(d); d != want {
				t.Fatalf("factor %v, wait %d: got %v; want %v", c.factor, i, d, want)
			}
		}
	}
}
