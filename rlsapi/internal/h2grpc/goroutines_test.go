package h2grpc

import (
	"runtime"
	"testing"
)

// New starts no goroutine: it kept 64 workers for UnaryHandlers, which rlsapi (serving
// with an AsyncHandler on the reader) never used.
func TestNewStartsNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s := New(Config{})
	defer s.Stop()
	if n := runtime.NumGoroutine() - before; n > 4 { // room for other tests' goroutines ending late
		t.Fatalf("New started %d goroutines", n)
	}
}
