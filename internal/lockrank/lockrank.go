// Package lockrank writes down, once, the order in which a node's locks are taken, and
// checks it. Each lock's rank is in its type (Mutex[OwnerMu], say); a goroutine may
// take a lock only while every lock it holds ranks lower. Built with the tag lockrank
// (make test builds every package so) every acquisition is checked, and an
// inversion, which two goroutines taking the same two locks could turn into a
// deadlock, panics with both locks named. Without the tag the check compiles away and
// a Mutex is sync's.
//
// A try-lock (TryLock, TryRLock) never waits, so it cannot deadlock: it is not checked,
// only recorded once it succeeds.
package lockrank

import "sync"

// Ranker names a rank: the types below, in the order their locks are taken.
type Ranker interface {
	Rank() (order int, name string)
}

// The ranks, outer first. The owner's locks are taken under Owner.mu, never the other
// way round; lease.Keeper's is last: the owner asks the keeper under its own locks
// (SetClaims and LeftRun under Owner.mu), and the keeper calls out
// (OnChange, OnLapse) only once it let go of its lock.
type (
	OwnerMu      struct{} // owner.Owner.mu: ring changes, lapses, ticks, handoffs, Redis outcomes
	OwnerDecide  struct{} // owner.Owner.decide: held shared while ops are decided
	OwnerFlush   struct{} // owner's write-behind queue (flusher.mu)
	OwnerBlind   struct{} // owner's blind counters (blindKeys.mu)
	OwnerLoad    struct{} // one load's fence checks (load.mu)
	OwnerWaiting struct{} // owner's waiting requests (waiters.mu)
	OwnerInbox   struct{} // outcomes posted to the owner's driver (inbox.mu)
	LeaseKeeper  struct{} // lease.Keeper.mu
)

func (OwnerMu) Rank() (int, string)      { return 10, "owner.Owner.mu" }
func (OwnerDecide) Rank() (int, string)  { return 20, "owner.Owner.decide" }
func (OwnerFlush) Rank() (int, string)   { return 40, "owner.flusher.mu" }
func (OwnerBlind) Rank() (int, string)   { return 60, "owner.blindKeys.mu" }
func (OwnerLoad) Rank() (int, string)    { return 70, "owner.load.mu" }
func (OwnerWaiting) Rank() (int, string) { return 80, "owner.waiters.mu" }
func (OwnerInbox) Rank() (int, string)   { return 85, "owner.inbox.mu" }
func (LeaseKeeper) Rank() (int, string)  { return 90, "lease.Keeper.mu" }

// Mutex is a sync.Mutex of rank R.
type Mutex[R Ranker] struct{ mu sync.Mutex }

func (m *Mutex[R]) Lock() {
	if checking {
		var r R
		acquire(r, m)
	}
	m.mu.Lock()
}

func (m *Mutex[R]) TryLock() bool {
	ok := m.mu.TryLock()
	if checking && ok {
		var r R
		record(r, m)
	}
	return ok
}

func (m *Mutex[R]) Unlock() {
	if checking {
		release(m)
	}
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex of rank R.
type RWMutex[R Ranker] struct{ mu sync.RWMutex }

func (m *RWMutex[R]) Lock() {
	if checking {
		var r R
		acquire(r, m)
	}
	m.mu.Lock()
}

func (m *RWMutex[R]) Unlock() {
	if checking {
		release(m)
	}
	m.mu.Unlock()
}

func (m *RWMutex[R]) RLock() {
	if checking {
		var r R
		acquire(r, m)
	}
	m.mu.RLock()
}

func (m *RWMutex[R]) TryRLock() bool {
	ok := m.mu.TryRLock()
	if checking && ok {
		var r R
		record(r, m)
	}
	return ok
}

func (m *RWMutex[R]) RUnlock() {
	if checking {
		release(m)
	}
	m.mu.RUnlock()
}
