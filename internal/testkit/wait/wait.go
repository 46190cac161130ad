// Package wait polls a condition until it holds or a deadline passes, so tests wait
// for what they mean instead of sleeping for a guessed time.
package wait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often Until checks the condition.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it returns nil, and returns nil; or, once
// timeout has passed, returns cond's last error. cond is called at least once.
func Until(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(Interval)
	}
}

// For is Until for tests: when the condition still fails at the deadline, it fails
// the test, quoting the condition's last error.
func For(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Until(timeout, cond); err != nil {
		t.Fatalf("not true after %v: %v", timeout, err)
	}
}

// ErrNotYet is a generic error for conditions that have nothing better to say.
var ErrNotYet = errors.New("condition not met yet")

// True is Until for a condition that only says yes or no: it returns nil once cond
// holds, or an error naming the timeout.
func True(timeout time.Duration, cond func() bool) error {
	return Until(timeout, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("%w within %v", ErrNotYet, timeout)
	})
}

// ForTrue is True for tests: it fails the test when cond does not hold in time.
func ForTrue(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := True(timeout, cond); err != nil {
		t.Fatal(err)
	}
}
