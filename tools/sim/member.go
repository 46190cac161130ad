package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Membership is modelled, not run (memberlist needs real sockets and time): a node
// sees a member alive while it can reach it, directly or through a third node (as
// memberlist's indirect probes do), and dead once it could not for detectAfter; a
// member that stops gracefully is seen leaving while it drains, then left. A member's
// new run (it restarted) is seen only after a gossip delay (runSeenAfter), while its
// heartbeats flow at once, as they do in production.

type memberState uint8

const (
	alive memberState = iota
	leaving
	left
	dead
)

type memberView struct {
	state memberState
	since time.Duration // when the node last changed its view of it
	heard time.Duration // when it last reached it
	run   uint64        // the member's run it last saw (the one that left, once left)
	newAt time.Duration // a new run was reached: when gossip shows it (0: none pending)
}

// runSeenAfter bounds how long gossip takes to show a member's new run to a node that
// reaches it: memberlist spreads a rejoin by gossip, a few rounds.
const runSeenAfter = 300 * time.Millisecond

// detectAfter is how long a node must fail to reach a member before it is declared
// dead (failure detection, --gossip-* in production).
const detectAfter = 2 * time.Second

// gossip updates every running node's view of the members, and each node tells its
// keeper and rebuilds its ring.
func (w *world) gossip() {
	for _, n := range w.nodes {
		if !n.up || n.pausedUntil > w.sched.now {
			continue
		}
		for _, m := range w.nodes {
			if m.inc != 0 && m != n {
				w.see(n, m)
			}
		}
		if n.view[n.name] == nil {
			n.view[n.name] = &memberView{state: alive, since: w.sched.now, run: n.inc}
		}
		if n.leaving {
			n.view[n.name].state = leaving
		}
		w.founds(n)
		n.syncMembership() // on every tick, changed or not, as node.watchMembership does
	}
}

// founds makes n found a cluster, as node.seesCluster does: when it knows no voters,
// no member it has ever seen has a smaller name, it sees every seed (its --join)
// alive, and every member it sees alive told it it has no voters either. A seed it cannot reach may be the one member that remembers the
// cluster (all others restarted): founding beside it would make two.
func (w *world) founds(n *node) {
	if n.keeper.HasVoters() {
		return
	}
	var seen []string
	for name, v := range n.view {
		if name < n.name {
			return
		}
		if v.state == alive {
			seen = append(seen, name)
		}
	}
	for i := 0; i < n.seeds; i++ {
		if v := n.view[w.nodes[i].name]; v == nil || v.state != alive {
			return
		}
	}
	if !n.keeper.NoneHaveVoters(seen) {
		return
	}
	n.keeper.Found(seen...)
	w.trace("%s founds a new cluster: no member it saw has voters", n.name)
}

// see updates n's view of m.
func (w *world) see(n, m *node) {
	now := w.sched.now
	v := n.view[m.name]
	reach := m.up && w.reaches(n, m)
	if v == nil {
		if !reach {
			return // never heard of: nothing to say
		}
		v = &memberView{state: alive, since: now, run: m.inc}
		n.view[m.name] = v
		v.heard = now
		w.seenAlive(v, m)
		return
	}
	if reach && m.inc != v.run && !w.newRunSeen(v, m) {
		return // its earlier run, as gossip last said
	}
	if reach {
		v.heard = now
	}
	was := v.state
	switch {
	case !m.up && m.stoppedGracefully():
		if reach || v.state == leaving || v.state == alive && now-v.heard < detectAfter {
			v.state = left // its leave reached this node (or gossip carries it)
		}
	case reach:
		w.seenAlive(v, m)
	case v.state != dead && v.state != left && now-v.heard >= detectAfter:
		v.state = dead
	}
	if v.state != was {
		v.since = now
	}
}

// newRunSeen reports whether gossip shows m's new run to a node whose view of m is v,
// a random delay after it was first reached.
func (w *world) newRunSeen(v *memberView, m *node) bool {
	now := w.sched.now
	if v.newAt == 0 {
		v.newAt = now + w.jitter(runSeenAfter/2)
	}
	if now < v.newAt {
		return false
	}
	v.run, v.newAt = m.inc, 0
	return true
}

// seenAlive sets what a reachable member is: leaving while it drains, else alive.
func (w *world) seenAlive(v *memberView, m *node) {
	switch {
	case m.leaving:
		v.state = leaving
	case v.state != alive:
		v.state = alive
	}
}

// reaches reports whether n can probe m now: directly, or through a third node that
// reaches both.
func (w *world) reaches(n, m *node) bool {
	if !w.responsive(m) {
		return false
	}
	if w.net.linked(n, m) {
		return true
	}
	for _, k := range w.nodes {
		if k != n && k != m && w.responsive(k) && w.net.linked(n, k) && w.net.linked(k, m) {
			return true
		}
	}
	return false
}

// responsive reports whether m answers probes: running and not frozen.
func (w *world) responsive(m *node) bool { return m.up && m.pausedUntil <= w.sched.now }

func sortedViewNames(v map[string]*memberView) []string {
	out := make([]string, 0, len(v))
	for name := range v {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// viewString prints what the node's membership says of every member, for failures.
func (n *node) viewString() string {
	var b strings.Builder
	b.WriteString("{")
	for i, name := range sortedViewNames(n.view) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%s", name, [...]string{"alive", "leaving", "left", "dead"}[n.view[name].state])
	}
	b.WriteString("}")
	return b.String()
}
