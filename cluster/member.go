package cluster

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// State is a member's state as this node sees it.
type State uint8

// The states events can tell apart; see the package doc.
const (
	StateAlive   State = iota + 1 // reachable (or suspected, not yet declared dead)
	StateLeaving                  // alive, but announced it is leaving: owns nothing any more
	StateLeft                     // gone after announcing it
	StateDead                     // gone without notice
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateLeaving:
		return "leaving"
	case StateLeft:
		return "left"
	case StateDead:
		return "dead"
	}
	return "unknown"
}

// Member is a node of the cluster as this node sees it.
type Member struct {
	Name        string
	Addr        string // gossip address, host:port
	RPCAddr     string // node-to-node address; empty when the metadata was unreadable
	ClientAddr  string // where Redis Cluster clients reach it; empty if it has none
	Zone        string // its failure domain (Config.Zone); empty if it has none
	Incarnation uint64 // the node's start time in ns: a restart under the same name changes it
	Features    uint8  // the bits its Config.Features advertises; 0 for releases before them
	State       State
	Since       time.Time // when this node saw State (or this incarnation) begin
	Version     string    // its build version, once heard ("" until then)
}

// Serving reports whether the member should own keys: alive, not leaving, and with
// an RPC address peers can reach it at.
func (m Member) Serving() bool { return m.State == StateAlive && m.RPCAddr != "" }

// forgetAfter is how long a dead or left member stays listed, so that operators can
// see what went away. memberlist itself forgets after GossipToTheDeadTime.
const forgetAfter = 5 * time.Minute

// table is the member list the event handlers maintain.
type table struct {
	mu       sync.Mutex
	self     string
	members  map[string]Member
	changes  chan struct{} // capacity 1: a pending signal stands for any number of changes
	joined   chan struct{} // closed when a peer is first seen alive
	isJoined bool
	closed   bool
	now      func() time.Time
}

func newTable(self string) *table {
	return &table{
		self:    self,
		members: make(map[string]Member),
		changes: make(chan struct{}, 1),
		joined:  make(chan struct{}),
		now:     time.Now,
	}
}

// set records m, stamping Since when the state changed, and signals a change when
// anything a reader could see changed.
func (t *table) set(m Member) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	old, ok := t.members[m.Name]
	m.Since = old.Since
	if !ok || old.State != m.State || old.Incarnation != m.Incarnation {
		m.Since = t.now()
	}
	t.members[m.Name] = m
	if m.Name != t.self && m.State == StateAlive {
		t.markJoinedLocked()
	}
	t.pruneLocked()
	if !ok || old != m {
		t.signalLocked()
	}
}

// gone records that m went away: left when its last metadata announced leaving
// (m.State is then StateLeaving), dead otherwise.
func (t *table) gone(m Member) {
	if m.State == StateLeaving {
		m.State = StateLeft
	} else {
		m.State = StateDead
	}
	t.set(m)
}

func (t *table) markJoinedLocked() {
	if !t.isJoined {
		t.isJoined = true
		close(t.joined)
	}
}

func (t *table) markJoined() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markJoinedLocked()
}

// signalLocked never blocks: memberlist is waiting on us, holding its node lock.
func (t *table) signalLocked() {
	select {
	case t.changes <- struct{}{}:
	default:
	}
}

func (t *table) pruneLocked() {
	cutoff := t.now().Add(-forgetAfter)
	for name, m := range t.members {
		if (m.State == StateDead || m.State == StateLeft) && m.Since.Before(cutoff) && name != t.self {
			delete(t.members, name)
		}
	}
}

// list returns the members that keep pass, sorted by name.
func (t *table) list(keep func(Member) bool) []Member {
	t.mu.Lock()
	t.pruneLocked()
	out := make([]Member, 0, len(t.members))
	for _, m := range t.members {
		if keep == nil || keep(m) {
			out = append(out, m)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (t *table) get(name string) (Member, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.members[name]
	return m, ok
}

// close stops updates and closes the changes channel, so receivers' loops end.
func (t *table) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.changes)
	}
}
