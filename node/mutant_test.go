//go:build simmutate

package node_test

import (
	"os"

	"github.com/leapcount/leapcount/internal/mutate"
)

// Built with the simmutate tag, LEAPCOUNT_MUTANT switches one safety rule off for the
// node tests (internal/mutate), to show a test catches its breach:
// LEAPCOUNT_MUTANT=ignore-clocks go test -tags simmutate -run TestClockOffsetIsMeasuredAndNothingIsLost ./node/
func init() {
	if m := os.Getenv("LEAPCOUNT_MUTANT"); m != "" {
		mutate.Set(m)
	}
}
