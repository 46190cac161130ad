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
// reports whether it did: a member that left stops being a voter; a member that a
// majority of the voters see alive becomes one; a member dead for DeadVoterAfter that a
// majority of the other voters do not see alive stops being one. Changes come in name
// order, so nodes that see the same make the same.
func (v *Voters) Update(view View, now int64) bool {
	if len(v.set) == 0 {
		return false
	}
	for _, n := range sorted(view.Left) {
		if v.set[n] && n != v.self {
			delete(v.set, n)
			return true
		}
	}
	alive := make(map[string]bool, len(view.Alive))
	for _, n := range view.Alive {
		alive[n] = true
	}
	for _, n := range sorted(view.Alive) {
		if !v.set[n] && v.agree(n, true, alive[n], now) >= v.Quorum() {
			v.set[n] = true
			return true
		}
	}
	for _, n := range v.List() {
		since, dead := view.DeadSince[n]
		if !dead || n == v.self || now-since < int64(v.cfg.DeadVoterAfter) {
			continue
		}
		if v.agree(n, false, false, now) >= (len(v.set)-1)/2+1 {
			delete(v.set, n)
			return true
		}
	}
	return false
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
