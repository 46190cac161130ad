package lease

import (
	"slices"
	"testing"
	"time"
)

func votersOf(self string, names ...string) *Voters {
	v := NewVoters(Config{Duration: time.Second}, self)
	for _, n := range names {
		v.set[n] = true
	}
	v.version = 1
	return v
}

func TestVotersAdoptAndFound(t *testing.T) {
	v := NewVoters(Config{}, "d")
	if !v.Empty() || v.Update(View{Alive: []string{"a", "d"}}, 0) {
		t.Fatal("a node with no voters changed them on its own")
	}
	v.Report("a", []string{"a", "b"}, nil, 1, 0)
	if !v.Empty() {
		t.Fatal("took voters from a report that had none")
	}
	v.Report("a", []string{"a", "b"}, []string{"a", "b", "c"}, 1, 0)
	if got := v.List(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("adopted %v; want [a b c]", got)
	}
	f := NewVoters(Config{}, "x")
	f.Found()
	if got := f.List(); !slices.Equal(got, []string{"x"}) || f.Quorum() != 1 {
		t.Fatalf("founder: %v quorum %d; want [x] 1", got, f.Quorum())
	}
}

func TestVotersAdmitWithMajority(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	view := View{Alive: []string{"a", "b", "c", "d"}}
	if v.Update(view, 0) {
		t.Fatalf("admitted d seen alive by a alone: %v", v.List())
	}
	v.Report("b", []string{"a", "b", "c", "d"}, []string{"a", "b", "c"}, 1, 0)
	if !v.Update(view, 0) || !v.Has("d") {
		t.Fatalf("d not admitted when a and b (2 of 3) see it: %v", v.List())
	}
	// Reports go stale.
	w := votersOf("a", "a", "b", "c")
	w.Report("b", []string{"d"}, nil, 1, 0)
	if w.Update(view, 3*int64(time.Second)) {
		t.Fatal("admitted on a report older than two lease durations")
	}
}

// TestMinorityCannotReshapeVoters is the split brain the voters exist to prevent: the
// side that sees only itself can neither drop the others nor add new members only it
// sees, while the majority side can drop the cut-off member.
func TestMinorityCannotReshapeVoters(t *testing.T) {
	dead := map[string]int64{"a": 0, "b": 0}
	c := votersOf("c", "a", "b", "c")
	later := 20 * int64(time.Second)
	for i := 0; i < 5; i++ {
		if c.Update(View{Alive: []string{"c", "d", "e"}, DeadSince: dead}, later) {
			t.Fatalf("minority changed its voters to %v", c.List())
		}
	}
	a := votersOf("a", "a", "b", "c")
	a.Report("b", []string{"a", "b"}, []string{"a", "b", "c"}, 1, later)
	if !a.Update(View{Alive: []string{"a", "b"}, DeadSince: map[string]int64{"c": 0}}, later) || a.Has("c") {
		t.Fatalf("majority did not drop c, dead for 20s and unseen by a and b: %v", a.List())
	}
	b := votersOf("b", "a", "b", "c")
	b.Report("a", []string{"a", "b"}, []string{"a", "b", "c"}, 1, 0)
	if b.Update(View{Alive: []string{"a", "b"}, DeadSince: map[string]int64{"c": 0}}, int64(time.Second)) {
		t.Fatal("dropped c dead for only 1s (DeadVoterAfter is 10s)")
	}
}

func TestVotersOneChangeAtATime(t *testing.T) {
	v := votersOf("a", "a", "b", "c", "d")
	view := View{Alive: []string{"a", "b", "e"}, Left: []string{"c", "d"}}
	v.Report("b", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	v.Report("c", nil, []string{"a", "b", "d"}, 2, 0) // c dropped itself as it left
	if !v.Update(view, 0) || v.Has("c") || !v.Has("d") || v.Version() != 2 {
		t.Fatalf("first update: %v version %d; want c's set taken (c gone, d still there), version 2", v.List(), v.Version())
	}
	if v.Update(view, 0) {
		t.Fatalf("second update before b took c's change: %v; want no change (the last one has not reached a majority)", v.List())
	}
	v.Report("b", view.Alive, []string{"a", "b", "d"}, 2, 0)
	if !v.Update(view, 0) || v.Has("d") || v.Version() != 3 {
		t.Fatalf("second update: %v version %d; want d gone, version 3", v.List(), v.Version())
	}
	if v.Update(view, 0) {
		t.Fatalf("third update changed something: %v", v.List())
	}
}

// A change whose set's majorities need not meet those of the set a member reports
// waits: m, cut off through earlier changes, still uses [a m z] of version 1, and a at
// version 3 with [a b] adding y (or m) would make a set one of whose majorities misses
// one of [a m z]'s: [a b y] and [a m z] share only a, and {b, y} misses {m, z}.
func TestVoterChangeKeepsMajoritiesMeeting(t *testing.T) {
	v := votersOf("a", "a", "b")
	v.version = 3
	view := View{Alive: []string{"a", "b", "m", "y"}}
	v.Update(view, 0) // learns who is alive: their reports are kept
	v.Report("b", view.Alive, []string{"a", "b"}, 3, 0)
	v.Report("m", view.Alive, []string{"a", "m", "z"}, 1, 0)
	if v.Update(view, 0) {
		t.Fatalf("changed the voters while m uses [a m z]: %v", v.List())
	}
	v.Report("m", view.Alive, []string{"a", "b"}, 3, 0)
	if !v.Update(view, 0) || v.Version() != 4 {
		t.Fatalf("no change once m took [a b]: %v", v.List())
	}
}

// A node that missed changes takes the newest set reported (follow), whoever reports
// it: a voter set with a higher version was made from its own.
func TestVotersFollowTheNewestSet(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	view := View{Alive: []string{"a", "b", "d"}}
	v.Update(view, 0)
	v.Report("d", view.Alive, []string{"a", "b", "d"}, 3, 0)
	if !v.Update(view, 0) || !slices.Equal(v.List(), []string{"a", "b", "d"}) || v.Version() != 3 {
		t.Fatalf("took %v version %d; want [a b d] version 3", v.List(), v.Version())
	}
	v.Report("b", view.Alive, []string{"a", "b", "c"}, 1, 0)
	if v.Update(view, 0) || !slices.Equal(v.List(), []string{"a", "b", "d"}) {
		t.Fatalf("went back to an older set: %v", v.List())
	}
}

func TestCompatibleVoterSets(t *testing.T) {
	for _, c := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"a", "b", "c"}, []string{"a", "b", "c", "d"}, true},
		{[]string{"a", "b", "x"}, []string{"a", "b", "y"}, false},
		{[]string{"a", "b", "c", "x"}, []string{"a", "b", "c", "y"}, true},
		{[]string{"a", "b"}, []string{"a", "b", "c", "d"}, true},
		{[]string{"a", "b", "c"}, []string{"a", "d", "e"}, false},
		{[]string{"a"}, []string{"b"}, false},
	} {
		if got := compatible(c.a, c.b); got != c.want {
			t.Errorf("compatible(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := compatible(c.b, c.a); got != c.want {
			t.Errorf("compatible(%v, %v) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

// Two voters never drop each other: each would be a majority of one, and both could
// decide every partition (found by the cluster simulation: a node cut off from the only
// other voter dropped it, while that one, restarted, formed a majority with a third).
func TestTwoVotersNeverDropEachOther(t *testing.T) {
	a := votersOf("a", "a", "b")
	later := 20 * int64(time.Second)
	if a.Update(View{Alive: []string{"a"}, DeadSince: map[string]int64{"b": 0}}, later) || !a.Has("b") {
		t.Fatalf("a dropped b, the other of two voters: %v", a.List())
	}
}

// A change waits until a majority of the voters report the voter set it starts from:
// else voter sets in use could drift two changes apart, and majorities of the two need
// not meet.
func TestVoterChangeWaitsForTheLastOneToBeAdopted(t *testing.T) {
	v := votersOf("a", "a", "b", "c", "d")
	view := View{Alive: []string{"a", "b", "c", "d", "e"}}
	v.Report("b", view.Alive, []string{"a", "b", "c"}, 1, 0) // b has not adopted d yet
	v.Report("c", view.Alive, []string{"a", "b", "c"}, 1, 0)
	if v.Update(view, 0) {
		t.Fatalf("added e while only a of a, b, c, d has [a b c d]: %v", v.List())
	}
	v.Report("b", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	v.Report("c", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	if !v.Update(view, 0) || !v.Has("e") {
		t.Fatalf("did not add e once a majority had [a b c d]: %v", v.List())
	}
}
