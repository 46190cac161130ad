//go:build simmutate

package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/mutate"
)

// TestMutantsAreCaught shows the simulation has teeth: with each safety rule of the
// ownership code switched off on purpose (package mutate), some seed fails. It runs the
// seeds in make test-long's order, in chunks, until one fails, and prints the first
// caught seed and what broke (make sim-mutants). It looks as far as
// LEAPCOUNT_SIM_MUTANT_SEEDS (default 1000; make sim-mutants: 20,000, all of make
// test-long's); LEAPCOUNT_SIM_MUTANTS=a,b runs only those.
func TestMutantsAreCaught(t *testing.T) {
	defer mutate.Set("")
	const chunk = 100
	last := uint64(1000)
	if v, err := strconv.ParseUint(os.Getenv("LEAPCOUNT_SIM_MUTANT_SEEDS"), 10, 64); err == nil && v > 0 {
		last = v
	}
	names := mutate.All
	if v := os.Getenv("LEAPCOUNT_SIM_MUTANTS"); v != "" {
		names = strings.Split(v, ",")
	}
	for _, m := range names {
		mutate.Set(m)
		start := time.Now()
		caught := false
		for first := uint64(1); first <= last && !caught; first += chunk {
			for _, r := range runSeeds(first, chunk, Options{Faults: true}) {
				if r.Failed() && failsAnyway(m, r) {
					t.Logf("%-20s seed %d fails without the mutant too: not a catch", m, r.Seed)
					continue
				}
				if r.Failed() {
					t.Logf("%-20s caught by seed %d (redis %v) after %v: %s", m, r.Seed, r.Redis,
						time.Since(start).Round(time.Millisecond), r.Violations[0])
					caught = true
					break
				}
			}
		}
		if !caught {
			t.Errorf("%s: no seed of 1-%d failed with the rule switched off", m, last)
		}
	}
}

// failsAnyway reports whether r's seed fails with mutant m switched off as well: a seed
// that breaks a rule of its own says nothing of m.
func failsAnyway(m string, r Result) bool {
	mutate.Set("")
	defer mutate.Set(m)
	return Run(Options{Seed: r.Seed, Redis: r.Redis, Faults: true}).Failed()
}
