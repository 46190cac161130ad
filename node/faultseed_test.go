package node_test

import (
	"os"
	"strconv"
	"time"
)

// faultSeeds is LEAPCOUNT_FAULT_SEED alone, or n fresh seeds.
func faultSeeds(n int) []uint64 {
	if s, err := strconv.ParseUint(os.Getenv("LEAPCOUNT_FAULT_SEED"), 10, 64); err == nil {
		return []uint64{s}
	}
	base := uint64(time.Now().UnixNano())
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)*7919
	}
	return out
}
