package node_test

import (
	"os"
	"strconv"
	"time"
)

// faultSeed is LEAPCOUNT_FAULT_SEED, or a fresh seed.
func faultSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("LEAPCOUNT_FAULT_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}
