package lease

import (
	"slices"
	"strings"
	"time"
)

// Voters is one node's set of voters, changed one member at a time by majority
// agreement (see the package doc). Not safe for concurrent use; Keeper serializes calls.
type Voters struct {
	cfg     Config
	self    string
	set     map[string]bool
	reports map[string]report // latest report of each member: what it sees alive, and its voters
}

type report struct {
	at     int64
	alive  map[string]bool
	voters []string
}

// View is what this node's membership says now.
type View struct {
	Alive     []string         // members alive or leaving, self included
	Leaving   []string         // members leaving gracefully (handing on), self included when it leaves
	Left      []string         // members that left gracefully
	DeadSince map[string]int64 // members declared dead, and since when (monotonic ns)
}

// NewVoters returns an empty set for the member named self: it takes the voters of the
// first peer that reports some (Report), or founds a cluster alone (Found).
func NewVoters(cfg Config, self string) *Voters {
	return &Voters{cfg: cfg.WithDefaults(), self: self, set: map[string]bool{}, reports: map[string]report{}}
}

// Found makes self the only voter: a node with no cluster to join founds one.
func (v *Voters) Found() { v.set = map[string]bool{v.self: true} }

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
// voters yet takes from's. Only voters' reports are kept, since only theirs count
// (agree): a report holds up to MaxMembers names, and anyone who reaches the rpc port
// may send one.
func (v *Voters) Report(from string, alive, voters []string, now int64) {
	if len(v.set) == 0 && len(voters) > 0 {
		for _, n := range voters {
			v.set[n] = true
		}
	}
	if !v.set[from] {
		return
	}
	r := report{at: now, alive: make(map[string]bool, len(alive)), voters: voters}
	for _, a := range alive {
		r.alive[a] = true
	}
	v.reports[from] = r
}

// Update applies at most one change the view and the fresh reports agree on, and
// reports whether it did: a member that leaves or left stops being a voter (a node
// that leaves drops itself first); a member that a majority of the voters see alive
// becomes one; a member dead for DeadVoterAfter that a majority of the voters (it
// counted against) do not see alive stops being one. Each in step with the voters' own
// sets (inStep, follow), so that the sets in use stay within one change of each other.
// Changes come in name order, so nodes that see the same make the same.
func (v *Voters) Update(view View, now int64) bool {
	if len(v.set) == 0 {
		return false
	}
	if v.set[v.self] && len(v.set) > 1 && slices.Contains(view.Leaving, v.self) {
		// Leaving: this node says so in its reports (the set without it), which lets
		// the others drop it in step even when it is one of two.
		delete(v.set, v.self)
		return true
	}
	if v.follow(now) {
		return true
	}
	for _, n := range sorted(append(slices.Clone(view.Left), view.Leaving...)) {
		if v.set[n] && n != v.self && v.inStep(n, false, now) {
			delete(v.set, n)
			return true
		}
	}
	alive := make(map[string]bool, len(view.Alive))
	for _, n := range view.Alive {
		alive[n] = true
	}
	for _, n := range sorted(view.Alive) {
		if !v.set[n] && v.agree(n, true, alive[n], now) >= v.Quorum() && v.inStep(n, true, now) {
			v.set[n] = true
			return true
		}
	}
	for _, n := range v.List() {
		since, dead := view.DeadSince[n]
		if !dead || n == v.self || now-since < int64(v.cfg.DeadVoterAfter) {
			continue
		}
		// A majority of all the voters, the dead one counted against: two voters never
		// drop each other, or each could become a majority of one.
		if v.agree(n, false, false, now) >= v.Quorum() && v.inStep(n, false, now) {
			delete(v.set, n)
			return true
		}
	}
	return false
}

// follow takes the voter set that a majority of this node's voters report, when it is
// not this node's own, and reports whether it did: they moved on while this node
// missed a change (it was cut off, or slow to see what they saw), and a node one change
// behind them holds the others back (inStep).
func (v *Voters) follow(now int64) bool {
	mine := v.List()
	count := map[string]int{}
	sets := map[string][]string{}
	for voter := range v.set {
		r, ok := v.reports[voter]
		if voter == v.self || !ok || now-r.at > 2*int64(v.cfg.Duration) || len(r.voters) == 0 {
			continue
		}
		got := sorted(r.voters)
		k := strings.Join(got, "\x00")
		count[k]++
		sets[k] = got
	}
	for k, n := range count {
		if n >= v.Quorum() && !slices.Equal(sets[k], mine) {
			v.set = make(map[string]bool, len(sets[k]))
			for _, name := range sets[k] {
				v.set[name] = true
			}
			return true
		}
	}
	return false
}

// inStep reports whether adding (or, with add false, dropping) name keeps every
// majority of the set it makes meeting every majority of the sets the voters use, so
// that no two nodes can each hold a partition by a majority of their own: a majority
// of the voters (self included) report sets it meets, and none reports one it does not
// (compatible). Sets one change apart always meet, so a node that missed a change can
// still be caught up with.
func (v *Voters) inStep(name string, add bool, now int64) bool {
	next := slices.DeleteFunc(v.List(), func(n string) bool { return n == name })
	if add {
		next = sorted(append(next, name))
	}
	n := 0
	for voter := range v.set {
		if voter == v.self {
			n++
			continue
		}
		r, ok := v.reports[voter]
		if !ok || now-r.at > 2*int64(v.cfg.Duration) || len(r.voters) == 0 {
			continue
		}
		if !compatible(sorted(r.voters), next) {
			return false
		}
		n++
	}
	return n >= v.Quorum()
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
func (v *Voters) agree(name string, alive, mine bool, now int64) int {
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
		if ok && now-r.at <= 2*int64(v.cfg.Duration) && r.alive[name] == alive {
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

// Forget drops reports older than a minute, and those of members no longer voters.
func (v *Voters) Forget(now int64) {
	for n, r := range v.reports {
		if now-r.at > int64(time.Minute) || !v.set[n] {
			delete(v.reports, n)
		}
	}
}
