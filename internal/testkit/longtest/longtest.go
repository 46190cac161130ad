// Package longtest marks the tests that make test leaves to make test-long, so that
// make test answers in minutes: the randomized fault runs and the fault suites against
// real node processes. Both targets run in CI (.ci/run); README says which test runs
// where.
package longtest

import "testing"

// Skip skips t under go test -short (make test): make test-long runs it.
func Skip(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long test: make test-long runs it")
	}
}
