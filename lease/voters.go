package lease

import (
	"slices"
	"time"
)

// Voters is one node's set of voters, changed one member at a time by majority
// agreement (see the package doc). Not safe for concurrent use; Keeper serializes calls.
type Voters struct {
	cfg     Config
	self    string
	set     map[string]bool
	version uint64            // changes made to the set since the cluster was founded (0: none known)
	since   time.Duration     // when this node took the set it has
	members map[string]bool   // the members alive at the last Update: their reports are kept too
	reports map[string]report // latest report of each voter and member: what it sees alive, and its voters

	acc     acceptor  // this node's acceptor state for the change from its set (change.go)
	prop    *proposal // the change this node proposes from its set, if any
	highest uint64    // the highest ballot number seen
	// overtaken: when this node's proposal last saw another's ballot above its own,
	// overtakenBy, and above any seen before.
	overtaken   time.Duration
	overtakenBy Ballot
	// acceptsFrom: no promise or acceptance before this (Quarantine).
	acceptsFrom time.Duration
}

type report struct {
	at      time.Duration
	since   time.Duration // when a report of this sender first showed this voter set
	alive   map[string]bool
	voters  []string
	version uint64
}

// View is what this node's membership says now.
type View struct {
	Alive     []string                 // members alive or leaving, self included
	Leaving   []string                 // members leaving gracefully (handing on), self included when it leaves
	Left      []string                 // members that left gracefully
	LeftRuns  map[string]uint64        // of Left: the run (incarnation) that left, as gossip says (0 or none: unknown)
	DeadSince map[string]time.Duration // members declared dead, and since when (the Keeper's Clock)
	Zones     map[string]string        // each member's zone (--zone; missing: none): voters spread over them
	Runs      map[string]uint64        // of Alive: each one's run (incarnation), as gossip says (missing or 0: unknown)
}

// NewVoters returns an empty set for the member named self: it takes the voters of the
// first peer that reports some (Report), or founds a cluster alone (Found).
func NewVoters(cfg Config, self string) *Voters {
	return &Voters{cfg: cfg.WithDefaults(), self: self, set: map[string]bool{}, members: map[string]bool{},
		reports: map[string]report{}}
}

// Found makes self the only voter: a node with no cluster to join founds one.
func (v *Voters) Found() { v.FoundWith(nil, nil) }

// FoundWith founds a cluster whose first voters are self and, up to their number
// (Config.TargetVoters), the members of others in the order they would join the voters
// (byZone): each of them must have said it knows no voters (Keeper.Found checks), so none
// holds or grants a lease under another set. The first set has none before it, so it
// needs none of the changes, a lease's length apart, that growing from self alone takes.
func (v *Voters) FoundWith(others []string, zones map[string]string) {
	v.set, v.version, v.acceptsFrom = map[string]bool{v.self: true}, 1, 0
	others = slices.DeleteFunc(slices.Clone(others), func(n string) bool { return n == v.self })
	want := v.cfg.TargetVoters(len(others) + 1)
	for _, n := range v.byZone(others, zones, true) {
		if len(v.set) >= want {
			break
		}
		v.set[n] = true
	}
}

// Version counts the changes made to the voters since the cluster was founded: of two
// sets, the one with the higher version was made from the other, directly or not.
func (v *Voters) Version() uint64 { return v.version }

// Empty reports whether there are no voters yet.
func (v *Voters) Empty() bool { return len(v.set) == 0 }

// Has reports whether name is a voter.
func (v *Voters) Has(name string) bool { return v.set[name] }

// List returns the voters, sorted.
func (v *Voters) List() []string {
	out := make([]string, 0, len(v.set))
	for n := range v.set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Quorum is the number of voters that make a majority.
func (v *Voters) Quorum() int { return len(v.set)/2 + 1 }

// Report records what from sees, as its heartbeat or reply said at now. A node with no
// voters yet takes from's. Only the reports of voters and of members alive are kept:
// the voters' count (agree, follow), and every member's set must meet a new one
// (inStep); a report holds up to MaxMembers names, and anyone who reaches the rpc port
// may send one.
func (v *Voters) Report(from string, alive, voters []string, version uint64, now time.Duration) {
	if len(v.set) == 0 && len(voters) > 0 {
		v.adopt(voters, version, now)
	}
	if !v.set[from] && !v.members[from] {
		return
	}
	r := report{at: now, since: now, voters: sorted(voters), version: version}
	if old, ok := v.reports[from]; ok && old.version == version && slices.Equal(old.voters, r.voters) {
		r.since = old.since
	}
	if v.set[from] { // only a voter's view of who is alive counts (agree)
		r.alive = make(map[string]bool, len(alive))
		for _, a := range alive {
			r.alive[a] = true
		}
	}
	v.reports[from] = r
}

func (v *Voters) adopt(voters []string, version uint64, now time.Duration) {
	v.set = make(map[string]bool, len(voters))
	for _, n := range voters {
		v.set[n] = true
	}
	v.version, v.since = version, now
}

// Update applies at most one change the view and the fresh reports agree on, and
// reports whether it did: a member that leaves or left stops being a voter (a node
// that leaves drops itself first); a member that a majority of the voters see alive
// becomes one; a member dead for DeadVoterAfter that a majority of the voters (it
// counted against) do not see alive stops being one. Each in step with the voters' own
// sets (inStep, follow), so that the sets in use stay within one change of each other.
// Changes come in name order, so nodes that see the same make the same; which change is
// made from a set, when two nodes want different ones, is chosen by ballot
// (change.go): a change proposed may be made only after a round trip or two.
func (v *Voters) Update(view View, now time.Duration) bool {
	clear(v.members)
	for _, n := range view.Alive {
		v.members[n] = true
	}
	if len(v.set) == 0 {
		return false
	}
	if v.follow(now) {
		return true
	}
	if v.prop != nil && v.prop.base == v.version {
		return v.stepProposal(now) // one change at a time: the one under way goes on
	}
	if v.set[v.self] && len(v.set) > 1 && slices.Contains(view.Leaving, v.self) && v.inStep(v.self, false, now) {
		// Leaving: this node says so in its reports (the set without it), which lets
		// the others drop it in step even when it is one of two.
		return v.change(v.self, false, now)
	}
	for _, n := range sorted(append(slices.Clone(view.Left), view.Leaving...)) {
		if v.set[n] && n != v.self && v.inStep(n, false, now) {
			return v.change(n, false, now)
		}
	}
	staying := slices.DeleteFunc(slices.Clone(view.Alive), func(n string) bool {
		return slices.Contains(view.Leaving, n) // on its way out: adding it back would undo its drop
	})
	if len(v.set) < v.cfg.TargetVoters(len(staying)) {
		for _, n := range v.byZone(staying, view.Zones, true) {
			if !v.set[n] && v.agree(n, true, true, now) >= v.Quorum() {
				// The first that may join, or none yet: another in its place would undo a
				// drop made to make room for it (crowded).
				return v.inStep(n, true, now) && v.change(n, true, now)
			}
		}
	}
	for _, n := range v.List() {
		since, dead := view.DeadSince[n]
		if !dead || n == v.self || now-since < v.cfg.DeadVoterAfter {
			continue
		}
		// A majority of all the voters, the dead one counted against: two voters never
		// drop each other, or each could become a majority of one.
		if v.agree(n, false, false, now) >= v.Quorum() && v.inStep(n, false, now) {
			return v.change(n, false, now)
		}
	}
	if drop, ok := v.crowded(staying, view.Zones, now); ok {
		return v.change(drop, false, now) // and the add above fills its place from another zone
	}
	if len(v.set) > v.cfg.TargetVoters(v.cfg.Voters) {
		// More voters than Voters allows (the set of a cluster that ran with more, or
		// with every member a voter): the first of a crowded zone goes.
		for _, n := range v.byZone(v.List(), view.Zones, false) {
			if v.inStep(n, false, now) {
				return v.change(n, false, now)
			}
			break // one candidate, the same on every node: the next waits for it
		}
	}
	return false
}

// crowded returns a voter to drop so that another zone's member can take its place: the
// voters are as many as they should be, one zone holds at least two more of them than the
// zone of a member that could join them (alive, a majority of the voters see it so), and
// the drop may be made now. Voters that grew as members joined, zone by zone, spread
// out so, one zone's loss leaving a majority whenever the members allow it.
func (v *Voters) crowded(staying []string, zones map[string]string, now time.Duration) (string, bool) {
	if len(zones) == 0 || len(v.set) < v.cfg.TargetVoters(len(staying)) {
		return "", false
	}
	count := map[string]int{}
	for n := range v.set {
		count[zones[n]]++
	}
	drop := v.byZone(v.List(), zones, false)[0]
	for _, n := range staying {
		if !v.set[n] && count[zones[drop]] >= count[zones[n]]+2 && v.agree(n, true, true, now) >= v.Quorum() {
			return drop, v.inStep(drop, false, now)
		}
	}
	return "", false
}

// byZone orders names as candidates to add as voters (add) or to drop: to add, those
// of the zones with the fewest voters first, so that the voters spread over the zones
// and one zone's loss keeps a majority; to drop, those of the zones with the most.
// Within a zone, by name, so that every node orders them alike. zones labels each
// member's zone ("" or missing: no zone, one zone of its own).
func (v *Voters) byZone(names []string, zones map[string]string, add bool) []string {
	count := map[string]int{}
	for n := range v.set {
		count[zones[n]]++
	}
	out := sorted(names)
	slices.SortStableFunc(out, func(a, b string) int {
		ca, cb := count[zones[a]], count[zones[b]]
		if add {
			return ca - cb
		}
		return cb - ca
	})
	return out
}

// change proposes the next version of the set: with name added (or, with add false,
// dropped). It reports whether the set changed now (propose).
func (v *Voters) change(name string, add bool, now time.Duration) bool {
	next := slices.DeleteFunc(v.List(), func(n string) bool { return n == name })
	if add {
		next = sorted(append(next, name))
	}
	return v.propose(next, now)
}

// follow takes the newest voter set a fresh report shows, when it is newer than this
// node's own (a higher version, or the same version made differently, the greater
// list first), and reports whether it did: the others changed it while this node
// missed the change (it was cut off, paused, or slow to see what they saw). Every set
// was made in step (inStep), so a node that takes a newer one only catches up.
func (v *Voters) follow(now time.Duration) bool {
	best, bestVersion := v.List(), v.version
	for from, r := range v.reports {
		if from == v.self || now-r.at > 2*v.cfg.Duration || len(r.voters) == 0 {
			continue
		}
		if r.version > bestVersion || r.version == bestVersion && slices.Compare(r.voters, best) > 0 {
			best, bestVersion = r.voters, r.version
		}
	}
	if bestVersion == v.version && slices.Equal(best, v.List()) {
		return false
	}
	v.adopt(best, bestVersion, now)
	return true
}

// inStep reports whether adding (or, with add false, dropping) name may be done now:
// a majority of the voters (self included) have reported this node's set at its
// version for a grant's length (settled), so the last change has reached them (as a
// Raft leader waits for a configuration change to commit before the next) and every
// lease granted under the set before it has run out; and every set any voter or member
// reports meets the new one (compatible): no two nodes can then each hold a partition
// by a majority of their own set.
func (v *Voters) inStep(name string, add bool, now time.Duration) bool {
	mine := v.List()
	next := slices.DeleteFunc(slices.Clone(mine), func(n string) bool { return n == name })
	if add {
		next = sorted(append(next, name))
	}
	n := 0
	if v.set[v.self] && v.settled(v.since, now) {
		n++
	}
	for from, r := range v.reports {
		if from == v.self || now-r.at > 2*v.cfg.Duration || len(r.voters) == 0 {
			continue
		}
		if !compatible(r.voters, next) {
			return false // a member not a voter here may still hold by its own set's majority
		}
		if v.set[from] && r.version == v.version && slices.Equal(r.voters, mine) && v.settled(r.since, now) {
			n++
		}
	}
	return n >= v.Quorum()
}

// settled reports whether a voter that took this node's set at since (or was first
// seen with it then) has had it for a grant's length at now. Grants count only under
// the set their grantor holds (sameVoters), and a voter never goes back to an older
// set: by now none of its grants under the set before this one runs. Every majority of
// that set meets a majority of this one, so no lease granted under it runs either, and
// the next set, which may share no majority with it, can be made. The first set
// (version 1) had none before it.
func (v *Voters) settled(since, now time.Duration) bool {
	return v.version <= 1 || now-since >= v.cfg.hold()
}

// compatible reports whether every majority of the sorted set a meets every majority
// of the sorted set b: the members of a majority of a outside b, at most |a\b|, leave
// at least quorum(a)-|a\b| of it in both, and likewise for b; the two shares must not
// fit side by side in what a and b share.
func compatible(a, b []string) bool {
	both := 0
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			both++
		}
	}
	inA := max(0, len(a)/2+1-(len(a)-both))
	inB := max(0, len(b)/2+1-(len(b)-both))
	return inA+inB > both
}

// agree counts the voters other than name that see name alive (or, with alive false,
// do not), self included with what it sees (mine), from reports fresher than two lease
// durations.
func (v *Voters) agree(name string, alive, mine bool, now time.Duration) int {
	n := 0
	for voter := range v.set {
		if voter == name {
			continue
		}
		if voter == v.self {
			if mine == alive {
				n++
			}
			continue
		}
		r, ok := v.reports[voter]
		if ok && now-r.at <= 2*v.cfg.Duration && r.alive[name] == alive {
			n++
		}
	}
	return n
}

func sorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

// Forget drops reports older than a minute, and those of nodes neither voters nor
// members alive.
func (v *Voters) Forget(now time.Duration) {
	for n, r := range v.reports {
		if now-r.at > time.Minute || !v.set[n] && !v.members[n] {
			delete(v.reports, n)
		}
	}
}
