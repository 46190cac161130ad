package rlsapi

import (
	"runtime"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/limits"
)

// New starts no goroutine before Serve. grpc.NumStreamWorkers kept 64 for grpc-go's
// server, which serves only what h2grpc hands it (health, reflection, compressed
// calls), each already on a goroutine of h2grpc's; and h2grpc kept 64 more for
// handlers rlsapi does not have.
func TestNewStartsNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(Config{Decider: &counter.Local{Store: leaparray.NewStore()}, Rules: func() *limits.Rules { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine() - before; n > 4 { // room for other tests' goroutines ending late
		t.Fatalf("New started %d goroutines", n)
	}
	s.fast.Stop()
	s.grpc.Stop()
}
