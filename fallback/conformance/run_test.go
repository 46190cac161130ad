package conformance

import (
	"testing"

	"github.com/leapcount/leapcount/leaparray"
)

// The in-memory store against itself: Run finds no difference, and it exercises every
// path of the generator without Redis.
func TestMemoryAgainstItself(t *testing.T) {
	Run(t, Memory(leaparray.NewStore()), Memory(leaparray.NewStore()), Options{Seed: 1, Steps: 3000})
}

// A store that loses counts must be caught.
func TestCatchesADifference(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Run(ft, Memory(leaparray.NewStore()), lossy{Memory(leaparray.NewStore())}, Options{Seed: 2, Steps: 3000})
	}()
	if !ft.failed {
		t.Fatal("Run did not notice a store that drops every third incr")
	}
}

type lossy struct{ Store }

func (l lossy) Incr(key string, sp leaparray.Spec, n, now int64) (int64, error) {
	if now%3 == 0 {
		n = 0
	}
	return l.Store.Incr(key, sp, n, now)
}

// fakeT records Fatalf and stops the run, without failing the real test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Logf(string, ...any)   {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
