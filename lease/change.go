package lease

import (
	"slices"
	"time"
)

// Voter changes by ballot. Two nodes that make a change from the same voter set at
// the same moment (one sees a member leave, another a member join, neither the
// other's report yet) would make two sets of the next version whose majorities need
// not meet. A change is therefore chosen as a single-decree Paxos chooses a value: the
// voters of the set it is made from are its acceptors, each heartbeat carries its
// sender's phase message (ChangeMsg) and each reply the acceptor's state
// (ChangeState). Of the sets proposed from one version, at most one is ever accepted
// by a majority, and a later ballot proposes what an earlier one may have had
// accepted. The rules for what to change (Update) say which change a node wants;
// ballots decide which change is made.

// Ballot orders the attempts to change the voters from one set: by number, then by
// proposer, so that two proposers never share one.
type Ballot struct {
	N  uint64
	By string
}

// Less reports whether b comes before o.
func (b Ballot) Less(o Ballot) bool { return b.N < o.N || b.N == o.N && b.By < o.By }

// ChangeMsg is a proposer's phase message for the voter change from version Base
// (Request.Change): prepare (Accept false) asks the acceptors to promise to take no
// lower ballot; accept asks them to accept Value, a sorted voter set, at Ballot.
type ChangeMsg struct {
	Base   uint64
	Ballot Ballot
	Accept bool
	Value  []string
}

// ChangeState is an acceptor's state for the change from version Base (Reply.Change):
// the highest ballot it promised, and the last value it accepted and at which ballot
// (zero: none).
type ChangeState struct {
	Base     uint64
	Promised Ballot
	Accepted Ballot
	Value    []string
}

// acceptor is this node's state as an acceptor of the change from its set (version
// base); it starts afresh with each version.
type acceptor struct {
	base               uint64
	promised, accepted Ballot
	value              []string
}

// proposal is the change this node is trying to make from its set (version base).
type proposal struct {
	base     uint64
	ballot   Ballot
	accept   bool     // in the accept phase, proposing value
	value    []string // the set proposed once promised: one accepted before, or want
	want     []string // the set this node wants next
	promises map[string]ChangeState
	accepts  map[string]bool
	at       time.Duration // when the ballot's current phase began
}

// Quarantine makes this node promise and accept nothing before until: an acceptor's
// promises must outlive it, and an earlier run of this node may have made some it no
// longer remembers. A change chosen is announced by its proposer in a round it sends at
// once, and every voter follows the newest set reported: by until (two heartbeats after
// it started, see Keeper) one its earlier run helped choose has reached the others. Not
// longer: while it lasts, a change that needs this node's answer waits (a leave and a
// restart in a row, in a rolling restart, left the others without a majority of the
// set they used until their leases ran out, when it lasted a grant's length).
func (v *Voters) Quarantine(until time.Duration) { v.acceptsFrom = until }

// propose makes next the next voter set, by ballot, and reports whether the set
// changed now. A proposal under way for this version goes on whatever next is: one
// change at a time.
func (v *Voters) propose(next []string, now time.Duration) bool {
	if !v.set[v.self] {
		return false // only voters propose: the acceptors take no other's ballot
	}
	if v.prop == nil || v.prop.base != v.version {
		v.prop = &proposal{base: v.version, want: next}
		v.overtakenBy = Ballot{} // (a rival's ballots of another change)
		v.newBallot(now)
	}
	return v.stepProposal(now)
}

// newBallot begins the proposal's next ballot, above every ballot seen: its prepare
// phase, with this node's own promise.
func (v *Voters) newBallot(now time.Duration) {
	p := v.prop
	p.ballot = Ballot{N: max(v.highest, p.ballot.N) + 1, By: v.self}
	v.highest = p.ballot.N
	p.accept, p.value, p.at = false, nil, now
	p.promises, p.accepts = map[string]ChangeState{}, map[string]bool{}
}

// retryAfter is how long a ballot's phase may go unanswered by a majority before the next
// ballot begins (a rival's ballot overtook it, or messages were lost).
func (v *Voters) retryAfter() time.Duration { return v.cfg.Duration / 2 }

// stepProposal moves the proposal on as far as the answers so far allow, this node's
// own included, and reports whether the change was chosen and made.
func (v *Voters) stepProposal(now time.Duration) bool {
	p := v.prop
	if p == nil || p.base != v.version {
		v.prop = nil
		return false
	}
	if now-p.at > v.retryAfter() && now-v.overtaken > v.retryAfter() {
		v.newBallot(now)
	}
	v.answer(v.self, v.Accept(v.self, v.ChangeMsg(), v.List(), v.version, now))
	if !p.accept && len(p.promises) >= v.Quorum() {
		// The value accepted at the highest ballot among the promises may have been
		// chosen: it is proposed again; else this node's own.
		best := ChangeState{}
		for _, st := range p.promises {
			if best.Accepted.Less(st.Accepted) {
				best = st
			}
		}
		// Each phase gets retryAfter from its start: a ballot that had to finish both
		// within it never did where a round trip took more than a quarter of a lease.
		p.accept, p.value, p.at = true, p.want, now
		if best.Accepted != (Ballot{}) {
			p.value = best.Value
		}
		v.answer(v.self, v.Accept(v.self, v.ChangeMsg(), v.List(), v.version, now))
	}
	if p.accept && len(p.accepts) >= v.Quorum() {
		v.adopt(p.value, p.base+1, now)
		return true
	}
	return false
}

// ChangeMsg is this node's phase message for its heartbeats (nil: it proposes nothing).
func (v *Voters) ChangeMsg() *ChangeMsg {
	p := v.prop
	if p == nil || p.base != v.version {
		return nil
	}
	m := &ChangeMsg{Base: p.base, Ballot: p.ballot, Accept: p.accept}
	if p.accept {
		m.Value = p.value
	}
	return m
}

// Accept handles, at now, a phase message from a voter that sent it under voters at
// version (its heartbeat's), and returns this node's acceptor state for the change from
// its own set (nil: none, the sender's set is not this node's, or this node is in
// quarantine).
func (v *Voters) Accept(from string, m *ChangeMsg, voters []string, version uint64, now time.Duration) *ChangeState {
	if m == nil || now < v.acceptsFrom || version != v.version || !v.set[from] || !slices.Equal(voters, v.List()) {
		return nil
	}
	a := &v.acc
	if a.base != v.version {
		*a = acceptor{base: v.version}
	}
	if m.Base == v.version {
		switch {
		case !m.Accept && a.promised.Less(m.Ballot):
			a.promised = m.Ballot
		case m.Accept && !m.Ballot.Less(a.promised) && oneChangeFrom(v.List(), m.Value):
			a.promised, a.accepted, a.value = m.Ballot, m.Ballot, slices.Clone(m.Value)
		}
		v.highest = max(v.highest, m.Ballot.N)
		v.noteBallot(m.Ballot, now)
	}
	return &ChangeState{Base: a.base, Promised: a.promised, Accepted: a.accepted, Value: a.value}
}

// Answered counts a voter's acceptor state toward this node's proposal, and reports
// whether that moved it to its next phase (a round then goes at once).
func (v *Voters) Answered(from string, st *ChangeState, now time.Duration) bool {
	p := v.prop
	if st == nil || p == nil || st.Base != p.base || p.base != v.version || !v.set[from] {
		return false
	}
	v.highest = max(v.highest, st.Promised.N)
	v.noteBallot(st.Promised, now)
	accept := p.accept
	v.answer(from, st)
	if !accept && len(p.promises) >= v.Quorum() || accept && len(p.accepts) >= v.Quorum() {
		v.stepProposal(now)
		return true
	}
	return false
}

// noteBallot records, at now, a ballot of another proposer seen above this node's own:
// this node lets it run for retryAfter before it begins another. Two voters that want the
// same change (each makes the change it sees next) and each retried half a lease after its
// ballot began overtook each other for good once two round trips took longer than that
// (TestSlowHeartbeatsStillHoldLeases at a quarter of a lease); the one overtaken now waits
// for the other's ballot to be chosen, and goes on should it stall. Only a ballot above
// the last one noted starts the wait: acceptors report the same promise in every answer,
// and a rival that stopped (paused, gone) would otherwise hold this node back for good
// (sim seed 145334: the voters never grew back to five).
func (v *Voters) noteBallot(b Ballot, now time.Duration) {
	if p := v.prop; p != nil && b.By != v.self && p.ballot.Less(b) && v.overtakenBy.Less(b) {
		v.overtaken, v.overtakenBy = now, b
	}
}

// answer records one acceptor's state: a promise to this ballot, or its acceptance.
func (v *Voters) answer(from string, st *ChangeState) {
	p := v.prop
	if st == nil || p == nil || st.Base != p.base {
		return
	}
	switch {
	case !p.accept && st.Promised == p.ballot:
		p.promises[from] = *st
	case p.accept && st.Accepted == p.ballot && slices.Equal(st.Value, p.value):
		p.accepts[from] = true
	}
}

// oneChangeFrom reports whether next, sorted, is set with one member added or dropped:
// the only change an acceptor takes.
func oneChangeFrom(set, next []string) bool {
	for i := 1; i < len(next); i++ {
		if next[i-1] >= next[i] {
			return false // not sorted, or a name twice
		}
	}
	switch len(next) - len(set) {
	case 1:
		return isSubset(set, next)
	case -1:
		return isSubset(next, set)
	}
	return false
}

// isSubset reports whether every name of the sorted a is in the sorted b.
func isSubset(a, b []string) bool {
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			return false
		}
	}
	return true
}
