package lease

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ballotPair is two voters of [a b], each having the other's report: a sees b leaving
// (and drops it), b sees c join (and adds it), from one set at one moment (sim seed
// 7553, where n1 made [n0 n1 n2] and n0 made [n0], both version 3: two deciders).
func ballotPair() (a, b *Voters, viewA, viewB View) {
	viewA = View{Alive: []string{"a", "b", "c"}, Leaving: []string{"b"}}
	viewB = View{Alive: []string{"a", "b", "c"}}
	a, b = votersOf("a", "a", "b"), votersOf("b", "a", "b")
	for _, v := range []*Voters{a, b} {
		v.Update(View{Alive: viewA.Alive}, 0) // learns who is alive: their reports are kept
	}
	a.Report("b", viewB.Alive, []string{"a", "b"}, 1, 0)
	b.Report("a", viewA.Alive, []string{"a", "b"}, 1, 0)
	return a, b, viewA, viewB
}

// exchange delivers from's heartbeat to to and its reply back, each unless dropped.
func exchange(from, to *Voters, now time.Duration, drop func() bool) {
	m := from.ChangeMsg()
	if drop() {
		return
	}
	st := to.Accept(from.self, m, from.List(), from.Version(), now)
	to.Report(from.self, []string{"a", "b", "c"}, from.List(), from.Version(), now)
	if drop() {
		return
	}
	from.Report(to.self, []string{"a", "b", "c"}, to.List(), to.Version(), now)
	from.Answered(to.self, st, now)
}

// Two voters that each want another change from one set make at most one: whatever
// the order and loss of their heartbeats, every node that leaves version 1 takes the
// same set. Before ballots, each made its own at once.
func TestConcurrentVoterChangesMakeOneSet(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for run := 0; run < 200; run++ {
		a, b, viewA, viewB := ballotPair()
		now := time.Hour
		loss := rng.Float64()
		drop := func() bool { return rng.Float64() < loss }
		for step := 0; step < 200 && (a.Version() == 1 || b.Version() == 1); step++ {
			now += time.Duration(rng.IntN(100)) * time.Millisecond
			switch rng.IntN(4) {
			case 0:
				a.Update(viewA, now)
			case 1:
				b.Update(viewB, now)
			case 2:
				exchange(a, b, now, drop)
			case 3:
				exchange(b, a, now, drop)
			}
			if a.Version() == 2 && b.Version() == 2 && !slices.Equal(a.List(), b.List()) {
				t.Fatalf("run %d (loss %.2f), step %d: a made %v and b %v, both version 2", run, loss, step, a.List(), b.List())
			}
		}
		for _, v := range []*Voters{a, b} {
			if v.Version() == 2 && !slices.Equal(v.List(), []string{"a"}) && !slices.Equal(v.List(), []string{"a", "b", "c"}) {
				t.Fatalf("run %d: %s made %v", run, v.self, v.List())
			}
		}
	}
}

// Without loss the two rival changes end in one: the pair does not stall.
func TestRivalVoterChangesEndInOne(t *testing.T) {
	a, b, viewA, viewB := ballotPair()
	now := time.Hour
	never := func() bool { return false }
	for step := 0; step < 50 && (a.Version() == 1 || b.Version() == 1); step++ {
		now += 50 * time.Millisecond
		a.Update(viewA, now)
		b.Update(viewB, now)
		exchange(a, b, now, never)
		exchange(b, a, now, never)
		a.Update(viewA, now) // follows b's set, when b's was chosen
		b.Update(viewB, now)
	}
	if a.Version() != 2 || b.Version() != 2 || !slices.Equal(a.List(), b.List()) {
		t.Fatalf("a has %v (version %d), b %v (version %d); want one set at version 2", a.List(), a.Version(), b.List(), b.Version())
	}
}

// A rival's ballot that an acceptor promised, its proposer then stopped (paused, gone),
// holds another voter's change back for retryAfter, not for good, though the acceptor
// reports that promise in every answer (sim seed 145334: the voters never grew back to
// five).
func TestAStoppedRivalHoldsAChangeBackOnlyAWhile(t *testing.T) {
	view := View{Alive: []string{"a", "b", "c"}, Leaving: []string{"b"}}
	a, c := votersOf("a", "a", "b", "c"), votersOf("c", "a", "b", "c")
	for _, v := range []*Voters{a, c} {
		v.Update(View{Alive: view.Alive}, 0)
	}
	now := time.Hour
	rival := &ChangeMsg{Base: 1, Ballot: Ballot{N: 7, By: "b"}} // b's prepare; b then stops
	if st := c.Accept("b", rival, []string{"a", "b", "c"}, 1, now); st == nil || st.Promised != rival.Ballot {
		t.Fatalf("c answered b's prepare with %+v; want a promise", st)
	}
	never := func() bool { return false }
	start := now
	for a.Version() == 1 && now-start < 10*a.retryAfter() {
		now += 50 * time.Millisecond
		a.Update(view, now) // a wants b, which is leaving, out
		exchange(a, c, now, never)
	}
	if a.Version() != 2 || !slices.Equal(a.List(), []string{"a", "c"}) {
		t.Fatalf("after %v a has %v (version %d); want [a c] at version 2 within a few times %v", now-start, a.List(), a.Version(), a.retryAfter())
	}
}

// A node that started (not founded) promises and accepts nothing for a grant's length:
// its earlier run may have accepted a change it no longer remembers, and a majority
// counting its fresh promise could choose another.
func TestStartedVoterPromisesNothingAtFirst(t *testing.T) {
	b := votersOf("b", "a", "b")
	b.Quarantine(b.cfg.hold())
	m := &ChangeMsg{Base: 1, Ballot: Ballot{N: 1, By: "a"}}
	if st := b.Accept("a", m, []string{"a", "b"}, 1, b.cfg.hold()-1); st != nil {
		t.Fatalf("promised %+v while in quarantine", st)
	}
	if st := b.Accept("a", m, []string{"a", "b"}, 1, b.cfg.hold()); st == nil || st.Promised != m.Ballot {
		t.Fatalf("after the quarantine: %+v; want a promise to %+v", st, m.Ballot)
	}
}

// An acceptor takes only a set one change away from its own.
func TestAcceptorTakesOnlyOneChange(t *testing.T) {
	for _, c := range []struct {
		value []string
		ok    bool
	}{
		{[]string{"a", "b", "c"}, true},
		{[]string{"a"}, true},
		{[]string{"a", "b"}, false},
		{[]string{"c"}, false},
		{[]string{"a", "c", "d"}, false},
		{[]string{"b", "a", "c"}, false},
		{[]string{"a", "a", "b"}, false},
		{[]string{"a", "b", "c", "d"}, false},
	} {
		v := votersOf("b", "a", "b")
		st := v.Accept("a", &ChangeMsg{Base: 1, Ballot: Ballot{N: 1, By: "a"}, Accept: true, Value: c.value}, []string{"a", "b"}, 1, 0)
		if got := st.Accepted != (Ballot{}); got != c.ok {
			t.Errorf("from [a b], accepting %v: %v; want %v", c.value, got, c.ok)
		}
	}
}
