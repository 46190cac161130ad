package lease

import (
	"slices"
	"strings"
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

// update is v.Update with the other voters of v's set answering its ballot at once,
// each promising and then accepting: what the rules change from the set (the ballots
// themselves are change_test.go's). It reports whether the set changed.
func update(v *Voters, view View, now time.Duration) bool {
	version, list := v.Version(), v.List()
	if v.Update(view, now) {
		return true
	}
	for phase := 0; phase < 2; phase++ {
		m := v.ChangeMsg()
		if m == nil {
			break
		}
		for _, n := range v.List() {
			if n == v.self {
				continue
			}
			st := &ChangeState{Base: m.Base, Promised: m.Ballot}
			if m.Accept {
				st.Accepted, st.Value = m.Ballot, m.Value
			}
			if v.Answered(n, st, now) {
				break
			}
		}
	}
	return v.Version() != version || !slices.Equal(v.List(), list)
}

func TestVotersAdoptAndFound(t *testing.T) {
	v := NewVoters(Config{}, "d")
	if !v.Empty() || update(v, View{Alive: []string{"a", "d"}}, 0) {
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
	view := View{Alive: []string{"a", "b", "c", "d", "e"}}
	if update(v, view, 0) {
		t.Fatalf("admitted d seen alive by a alone: %v", v.List())
	}
	v.Report("b", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "c"}, 1, 0)
	if !update(v, view, 0) || !v.Has("d") {
		t.Fatalf("d not admitted when a and b (2 of 3) see it: %v", v.List())
	}
	// Reports go stale.
	w := votersOf("a", "a", "b", "c")
	w.Report("b", []string{"d"}, nil, 1, 0)
	if update(w, view, 3*time.Second) {
		t.Fatal("admitted on a report older than two lease durations")
	}
}

// TestMinorityCannotReshapeVoters is the split brain the voters exist to prevent: the
// side that sees only itself can neither drop the others nor add new members only it
// sees, while the majority side can drop the cut-off member.
func TestMinorityCannotReshapeVoters(t *testing.T) {
	dead := map[string]time.Duration{"a": 0, "b": 0}
	c := votersOf("c", "a", "b", "c")
	later := 20 * time.Second
	for i := 0; i < 5; i++ {
		if update(c, View{Alive: []string{"c", "d", "e"}, DeadSince: dead}, later) {
			t.Fatalf("minority changed its voters to %v", c.List())
		}
	}
	a := votersOf("a", "a", "b", "c")
	a.Report("b", []string{"a", "b"}, []string{"a", "b", "c"}, 1, later)
	if !update(a, View{Alive: []string{"a", "b"}, DeadSince: map[string]time.Duration{"c": 0}}, later) || a.Has("c") {
		t.Fatalf("majority did not drop c, dead for 20s and unseen by a and b: %v", a.List())
	}
	b := votersOf("b", "a", "b", "c")
	b.Report("a", []string{"a", "b"}, []string{"a", "b", "c"}, 1, 0)
	if update(b, View{Alive: []string{"a", "b"}, DeadSince: map[string]time.Duration{"c": 0}}, time.Second) {
		t.Fatal("dropped c dead for only 1s (DeadVoterAfter is 10s)")
	}
}

func TestVotersOneChangeAtATime(t *testing.T) {
	v := votersOf("a", "a", "b", "c", "d")
	view := View{Alive: []string{"a", "b", "e"}, Left: []string{"c", "d"}}
	v.Report("b", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	v.Report("c", nil, []string{"a", "b", "d"}, 2, 0) // c dropped itself as it left
	if !update(v, view, 0) || v.Has("c") || !v.Has("d") || v.Version() != 2 {
		t.Fatalf("first update: %v version %d; want c's set taken (c gone, d still there), version 2", v.List(), v.Version())
	}
	if update(v, view, 0) {
		t.Fatalf("second update before b took c's change: %v; want no change (the last one has not reached a majority)", v.List())
	}
	v.Report("b", view.Alive, []string{"a", "b", "d"}, 2, 0)
	if update(v, view, 0) {
		t.Fatalf("second update as b took c's change: %v; want no change before leases under the set before it ran out", v.List())
	}
	settled := v.cfg.hold()
	if !update(v, view, settled) || v.Has("d") || v.Version() != 3 {
		t.Fatalf("second update: %v version %d; want d gone, version 3", v.List(), v.Version())
	}
	if update(v, view, settled) {
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
	update(v, view, 0) // learns who is alive: their reports are kept
	v.Report("b", view.Alive, []string{"a", "b"}, 3, 0)
	v.Report("m", view.Alive, []string{"a", "m", "z"}, 1, 0)
	if update(v, view, 0) {
		t.Fatalf("changed the voters while m uses [a m z]: %v", v.List())
	}
	v.Report("m", view.Alive, []string{"a", "b"}, 3, 0)
	if !update(v, view, v.cfg.hold()) || v.Version() != 4 {
		t.Fatalf("no change once m took [a b]: %v", v.List())
	}
}

// A node that missed changes takes the newest set reported (follow), whoever reports
// it: a voter set with a higher version was made from its own.
func TestVotersFollowTheNewestSet(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	view := View{Alive: []string{"a", "b", "d"}}
	update(v, view, 0)
	v.Report("d", view.Alive, []string{"a", "b", "d"}, 3, 0)
	if !update(v, view, 0) || !slices.Equal(v.List(), []string{"a", "b", "d"}) || v.Version() != 3 {
		t.Fatalf("took %v version %d; want [a b d] version 3", v.List(), v.Version())
	}
	v.Report("b", view.Alive, []string{"a", "b", "c"}, 1, 0)
	if update(v, view, 0) || !slices.Equal(v.List(), []string{"a", "b", "d"}) {
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
	later := 20 * time.Second
	if update(a, View{Alive: []string{"a"}, DeadSince: map[string]time.Duration{"b": 0}}, later) || !a.Has("b") {
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
	if update(v, view, 0) {
		t.Fatalf("added e while only a of a, b, c, d has [a b c d]: %v", v.List())
	}
	v.Report("b", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	v.Report("c", view.Alive, []string{"a", "b", "c", "d"}, 1, 0)
	if !update(v, view, 0) || !v.Has("e") {
		t.Fatalf("did not add e once a majority had [a b c d]: %v", v.List())
	}
}

// A change waits until a majority of the voters have had the set it starts from for a
// grant's length: a lease granted under the set before may run until then, and the
// next set need share no majority with that one. Found by the cluster simulation (seed
// 2109): [n0 n1 n2] became [n0 n1] as n2 left, then [n1] as n0 left, within 0.3 s,
// while n0 still held partitions granted by n0 and n2; n1 alone granted them too.
func TestVoterChangeWaitsForLeasesOfTheSetBeforeToRunOut(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	v.version = 2 // [a b c] came from another set, whose leases may still run
	view := View{Alive: []string{"a", "b", "c"}, Leaving: []string{"a"}}
	v.Report("b", view.Alive, []string{"a", "b", "c"}, 2, 0)
	v.Report("c", view.Alive, []string{"a", "b", "c"}, 2, 0)
	settled := v.cfg.hold()
	if update(v, view, settled-1) {
		t.Fatalf("a dropped itself %v after the voters took [a b c]: %v; want it to wait a grant's length", time.Duration(settled-1), v.List())
	}
	if !update(v, view, settled) || v.Has("a") {
		t.Fatalf("a did not drop itself a grant's length after b and c took [a b c]: %v", v.List())
	}
	// b takes [b c] at once (a newer set is followed); c's report of it comes later.
	b := votersOf("b", "b", "c")
	b.version = 3
	b.since = settled
	b.Report("c", view.Alive, []string{"b", "c"}, 3, settled+time.Millisecond)
	dropC := View{Alive: []string{"b", "c"}, Leaving: []string{"c"}}
	if update(b, dropC, settled+time.Millisecond) {
		t.Fatalf("b dropped c right after [b c] was made: %v; n could still hold by a and c's grants under [a b c]", b.List())
	}
	if !update(b, dropC, settled+time.Millisecond+b.cfg.hold()) || !slices.Equal(b.List(), []string{"b"}) {
		t.Fatalf("b did not drop the leaving c once [b c] settled: %v", b.List())
	}
}

// A member leaving is not taken back as a voter because it is still alive: the voters
// went back and forth between dropping and adding it (sim seed 2109).
func TestLeavingMemberIsNotAddedBack(t *testing.T) {
	v := votersOf("a", "a", "b")
	view := View{Alive: []string{"a", "b", "c"}, Leaving: []string{"c"}}
	v.Report("b", view.Alive, []string{"a", "b"}, 1, 0)
	if update(v, view, 0) || v.Has("c") {
		t.Fatalf("added c, which is leaving: %v", v.List())
	}
}

func TestTargetVoters(t *testing.T) {
	for _, c := range []struct{ voters, members, want int }{
		{5, 0, 0}, {5, 1, 1}, {5, 2, 2}, {5, 3, 3}, {5, 4, 3}, {5, 5, 5}, {5, 6, 5}, {5, 200, 5},
		{3, 2, 2}, {3, 4, 3}, {3, 24, 3}, {7, 6, 5}, {7, 8, 7}, {1, 2, 1}, {1, 24, 1},
	} {
		if got := (Config{Voters: c.voters}).WithDefaults().TargetVoters(c.members); got != c.want {
			t.Errorf("Voters %d, %d members: target %d; want %d", c.voters, c.members, got, c.want)
		}
	}
	if err := (Config{Voters: 4}).Validate(); err == nil || !strings.Contains(err.Error(), "Voters 4") {
		t.Errorf("Validate of Voters 4: %v; want an error naming Voters", err)
	}
}

// seenBy reports to v, from each of its other voters in alive, that they see alive
// alive and hold v's set.
func seenBy(v *Voters, alive []string, now time.Duration) {
	for _, n := range v.List() {
		if n != v.self && slices.Contains(alive, n) {
			v.Report(n, alive, v.List(), v.Version(), now)
		}
	}
}

// TestVotersStopAtTheirTarget: a member joins the voters only while they are fewer
// than their target (Config.Voters, three below five members); the rest hold leases
// without granting any.
func TestVotersStopAtTheirTarget(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	four := View{Alive: []string{"a", "b", "c", "d"}}
	seenBy(v, four.Alive, 0)
	if update(v, four, 0) {
		t.Fatalf("four members: voters grew to %v; want three", v.List())
	}
	seven := View{Alive: []string{"a", "b", "c", "d", "e", "f", "g"}}
	now := time.Duration(0)
	for i := 0; i < 10; i++ {
		seenBy(v, seven.Alive, now)
		update(v, seven, now)
		now += v.cfg.hold()
	}
	if got := v.List(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("seven members: voters %v; want the first five", got)
	}
}

// TestDeadVoterIsReplaced: a voter dead for DeadVoterAfter is dropped, and a member that
// is not a voter takes its place, one change at a time.
func TestDeadVoterIsReplaced(t *testing.T) {
	v := votersOf("a", "a", "b", "c", "d", "e")
	alive := []string{"a", "b", "d", "e", "f", "g"}
	view := View{Alive: alive, DeadSince: map[string]time.Duration{"c": 0}}
	now := 20 * time.Second
	seenBy(v, alive, now)
	if !update(v, view, now) || v.Has("c") || len(v.List()) != 4 {
		t.Fatalf("c dead for 20s: voters %v; want c dropped", v.List())
	}
	if update(v, view, now) {
		t.Fatalf("replaced c before the drop settled: %v", v.List())
	}
	seenBy(v, alive, now) // the others take the set without c
	now += v.cfg.hold()
	seenBy(v, alive, now)
	if !update(v, view, now) || !slices.Equal(v.List(), []string{"a", "b", "d", "e", "f"}) {
		t.Fatalf("after the drop settled: voters %v; want f in c's place", v.List())
	}
}

// TestVotersSpreadOverZones: the member added is one of the zone with the fewest
// voters, so that one zone's loss keeps a majority.
func TestVotersSpreadOverZones(t *testing.T) {
	v := votersOf("a", "a", "b", "c")
	zones := map[string]string{"a": "z1", "b": "z1", "c": "z2", "d": "z1", "e": "z2", "f": "z3"}
	view := View{Alive: []string{"a", "b", "c", "d", "e", "f"}, Zones: zones}
	seenBy(v, view.Alive, 0)
	if !update(v, view, 0) || !v.Has("f") {
		t.Fatalf("voters %v; want f, of z3, which has none", v.List())
	}
}

// TestVotersShrinkToTheirCap: a set larger than Config.Voters allows (a cluster that
// ran with every member a voter) loses one voter a change, from its most crowded zone.
func TestVotersShrinkToTheirCap(t *testing.T) {
	v := NewVoters(Config{Duration: time.Second, Voters: 3}, "a")
	v.adopt([]string{"a", "b", "c", "d", "e"}, 1, 0)
	zones := map[string]string{"a": "z1", "b": "z2", "c": "z2", "d": "z3", "e": "z3"}
	view := View{Alive: []string{"a", "b", "c", "d", "e"}, Zones: zones}
	seenBy(v, view.Alive, 0)
	if !update(v, view, 0) || len(v.List()) != 4 || !v.Has("a") {
		t.Fatalf("voters %v; want one of z2 or z3 dropped, a (alone in z1) kept", v.List())
	}
}

// TestFounderMakesTheFirstVotersAtOnce: a founder takes itself and, up to their number,
// members that told it they have no voters, as version 1: no set came before it, so no
// lease under another set runs, and the voters need not grow a change at a time.
func TestFounderMakesTheFirstVotersAtOnce(t *testing.T) {
	v := NewVoters(Config{}, "c")
	v.FoundWith([]string{"a", "b", "c", "d", "e", "f", "g"}, nil)
	if got := v.List(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) || v.Version() != 1 {
		t.Fatalf("founder c of seven: voters %v version %d; want [a b c d e] version 1", got, v.Version())
	}
	k := NewKeeper(KeeperConfig{Self: "a", Partitions: 1, Clock: funcClock(func() time.Duration { return time.Second })})
	k.noVoters["b"] = time.Second // b told a it has no voters; x did not
	k.Found("a", "b", "x")
	if got := k.Voters(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("founder a, with b new and x unheard: voters %v; want [a b]", got)
	}
}

// TestVotersOfACrowdedZoneMakeRoom: voters that grew zone by zone (three of a, two of b)
// drop one of a once a member of c can join them, and c's member takes its place.
func TestVotersOfACrowdedZoneMakeRoom(t *testing.T) {
	v := votersOf("b1", "a1", "a2", "a3", "b1", "b2")
	zones := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b", "b2": "b", "c1": "c"}
	view := View{Alive: []string{"a1", "a2", "a3", "b1", "b2", "c1"}, Zones: zones}
	seenBy(v, view.Alive, 0)
	if !update(v, view, 0) || v.Has("a1") || len(v.List()) != 4 {
		t.Fatalf("voters %v; want a1, the first of the crowded zone a, dropped", v.List())
	}
	now := v.cfg.hold()
	seenBy(v, view.Alive, 0)
	v.Report("a1", view.Alive, v.List(), v.Version(), 0) // a1, a member now, took the set too
	seenBy(v, view.Alive, now)
	if !update(v, view, now) || !v.Has("c1") {
		t.Fatalf("voters %v; want c1 in a1's place", v.List())
	}
	now += v.cfg.hold()
	seenBy(v, view.Alive, now-v.cfg.hold())
	seenBy(v, view.Alive, now)
	if update(v, view, now) {
		t.Fatalf("voters changed again to %v; two of a, two of b and one of c are as spread as six members allow", v.List())
	}
	full := votersOf("b1", "a1", "a2", "a3", "b1", "c1")
	seenBy(full, []string{"a1", "a2", "a3", "a4", "b1", "c1"}, 0)
	zones["a4"] = "a"
	if update(full, View{Alive: []string{"a1", "a2", "a3", "a4", "b1", "c1"}, Zones: zones}, 0) {
		t.Fatalf("voters changed to %v; the only member that could join is of a, the crowded zone", full.List())
	}
}
