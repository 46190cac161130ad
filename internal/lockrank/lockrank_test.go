//go:build lockrank

package lockrank

import (
	"strings"
	"testing"
)

// Locks taken in rank order pass; an inversion panics naming both locks; a lock let go
// no longer counts.
func TestInversionPanics(t *testing.T) {
	var outer Mutex[OwnerMu]
	var inner RWMutex[OwnerDecide]
	outer.Lock()
	inner.RLock()
	inner.RUnlock()
	outer.Unlock()

	inner.Lock()
	defer inner.Unlock()
	defer func() {
		p := recover()
		msg, _ := p.(string)
		if !strings.Contains(msg, "owner.Owner.mu") || !strings.Contains(msg, "owner.Owner.decide") {
			t.Fatalf("taking owner.Owner.mu under owner.Owner.decide: recovered %v; want a panic naming both", p)
		}
	}()
	outer.Lock()
	outer.Unlock()
	t.Fatal("no panic")
}

// A try-lock is not checked (it cannot wait), but counts once held.
func TestTryLockIsRecordedNotChecked(t *testing.T) {
	var outer Mutex[OwnerMu]
	var inner RWMutex[OwnerDecide]
	inner.Lock()
	if !outer.TryLock() {
		t.Fatal("TryLock failed on a free lock")
	}
	outer.Unlock()
	inner.Unlock()
	if !inner.TryRLock() {
		t.Fatal("TryRLock failed on a free lock")
	}
	defer inner.RUnlock()
	defer func() {
		if recover() == nil {
			t.Fatal("a lock of lower rank taken under a try-locked one did not panic")
		}
	}()
	outer.Lock()
}
