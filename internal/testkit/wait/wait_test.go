package wait

import (
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	calls := 0
	err := Until(time.Second, func() error {
		calls++
		if calls < 3 {
			return ErrNotYet
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("got err %v after %d calls; want nil after 3", err, calls)
	}
}

func TestUntilReturnsLastErrorAtDeadline(t *testing.T) {
	last := errors.New("still false")
	start := time.Now()
	err := Until(30*time.Millisecond, func() error { return last })
	if err != last {
		t.Fatalf("got %v; want %v", err, last)
	}
	if elapsed := time.Since(start); elapsed < 30*time.Millisecond {
		t.Fatalf("returned after %v; want at least 30ms", elapsed)
	}
}

func TestTrueWaitsForYes(t *testing.T) {
	n := 0
	if err := True(time.Second, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("True: %v after %d calls; want nil after 3", err, n)
	}
	if err := True(30*time.Millisecond, func() bool { return false }); !errors.Is(err, ErrNotYet) {
		t.Fatalf("True of a false condition: %v; want ErrNotYet", err)
	}
}
