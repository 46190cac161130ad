package fairshare

import (
	"math"
	"testing"
)

func TestMaxMinFair(t *testing.T) {
	for _, c := range []struct {
		demands []float64
		cap     float64
		want    []float64
	}{
		{[]float64{10, 10, 10}, 30, []float64{10, 10, 10}},
		{[]float64{1, 10, 100}, 30, []float64{1, 10, 19}},
		{[]float64{1, 20, 100}, 30, []float64{1, 14.5, 14.5}},
		{[]float64{5, 5}, 30, []float64{15, 15}}, // the spare split evenly
		{[]float64{0, 90}, 30, []float64{0, 30}},
		{[]float64{2, 3, 4}, 6, []float64{2, 2, 2}},
		{nil, 10, []float64{}},
		{[]float64{3}, 0, []float64{0}},
	} {
		got := maxMinFair(c.demands, c.cap)
		if len(got) != len(c.want) {
			t.Fatalf("maxMinFair(%v, %v) = %v, want %v", c.demands, c.cap, got, c.want)
		}
		sum := 0.0
		for i := range got {
			sum += got[i]
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Fatalf("maxMinFair(%v, %v) = %v, want %v", c.demands, c.cap, got, c.want)
			}
		}
		if sum > c.cap+1e-9 {
			t.Fatalf("maxMinFair(%v, %v) shares %v, more than the capacity", c.demands, c.cap, sum)
		}
	}
}
