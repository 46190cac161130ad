package rlqs

import (
	"testing"
	"time"
)

func TestBucketFor(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want tokenBucket
		ok   bool
	}{
		{10.7, tokenBucket{3, 10, time.Second}, true},
		{1, tokenBucket{1, 1, time.Second}, true},
		{0.3, tokenBucket{1, 1, 4 * time.Second}, true},
		{0.01, tokenBucket{}, false}, // one every 100 s: past maxFill
		{0, tokenBucket{}, false},
	} {
		got, ok := bucketFor(c.rate, 10*time.Second)
		if got != c.want || ok != c.ok {
			t.Fatalf("bucketFor(%v) = %v %v, want %v %v", c.rate, got, ok, c.want, c.ok)
		}
		if ok && got.rate() > c.rate {
			t.Fatalf("bucketFor(%v) refills %v a second, more than asked", c.rate, got.rate())
		}
	}
	if p := (tokenBucket{3, 10, time.Second}).potential(3 * time.Second); p != 33 {
		t.Fatalf("potential over 3s of 10/s from 3 tokens = %v, want 33", p)
	}
}
