package fallback

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leapcount/leapcount/fallback/conformance"
	"github.com/leapcount/leapcount/leaparray"
)

// seed is LEAPCOUNT_SEED when set (to replay a failure), else the clock.
func seed(t testing.TB) uint64 {
	if s := os.Getenv("LEAPCOUNT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEAPCOUNT_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// The Redis store answers every operation exactly as the in-memory store does.
func TestConformanceWithMemoryStore(t *testing.T) {
	_, st := startStore(t)
	base := seed(t)
	for i := range uint64(4) {
		s := base + i
		t.Run(strconv.FormatUint(s, 10), func(t *testing.T) {
			keys := make([]string, len(conformance.DefaultKeys))
			for k, key := range conformance.DefaultKeys { // fresh keys per run
				keys[k] = strconv.FormatUint(s, 36) + "/" + key
			}
			keys[0] = "" // and the empty key once
			if i > 0 {
				keys[0] = "=" + strconv.FormatUint(s, 36)
			}
			conformance.Run(t, conformance.Memory(leaparray.NewStore()), ctxStore{st},
				conformance.Options{Seed: s, Steps: 2500, Keys: keys})
		})
	}
}
