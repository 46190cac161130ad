package sim

import (
	"slices"
	"time"
)

// Membership is modelled, not run (memberlist needs real sockets and time): a node
// sees a member alive while it can reach it, directly or through a third node (as
// memberlist's indirect probes do), and dead once it could not for detectAfter; a
// member that stops gracefully is seen leaving while it drains, then left.

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
}

// detectAfter is how long a node must fail to reach a member before it is declared
// dead (failure detection, --gossip-* in production).
const detectAfter = 2 * time.Second

// gossip updates every running node's view of the members, and each node whose view
// changed tells its keeper and rebuilds its ring.
func (w *world) gossip() {
	for _, n := range w.nodes {
		if !n.up || n.pausedUntil > w.sched.now {
			continue
		}
		changed := false
		for _, m := range w.nodes {
			if m.inc == 0 || m == n {
				continue
			}
			if w.see(n, m) {
				changed = true
			}
		}
		if n.view[n.name] == nil {
			n.view[n.name] = &memberView{state: alive, since: w.sched.now}
			changed = true
		}
		if n.leaving && n.view[n.name].state != leaving {
			n.view[n.name].state = leaving
			changed = true
		}
		if w.founds(n) {
			changed = true
		}
		if changed {
			n.syncMembership()
		} else {
			n.rebuildRing() // the voters change without gossip (node.watchMembership's tick)
		}
	}
}

// aloneWait is how long a node waits for a cluster's voters before it takes its cluster
// to be new (node/membership.go).
const aloneWait = 5 * time.Second

// founds makes n found a cluster, as node.seesCluster does, when it has waited
// aloneWait without learning any voter, sees a majority of its seeds alive, and no
// member it has ever seen has a smaller name (a whole cluster stopped and started
// again, say), and reports whether it did.
func (w *world) founds(n *node) bool {
	if n.keeper.HasVoters() || w.sched.now-n.startAt < aloneWait {
		return false
	}
	seen := 0 // members it sees alive, itself included: a majority of its seeds is needed
	for name, v := range n.view {
		if name < n.name {
			return false
		}
		if v.state == alive {
			seen++
		}
	}
	if seen < n.seeds/2+1 {
		return false
	}
	n.keeper.Found()
	w.trace("%s founds a new cluster: no member it saw has voters", n.name)
	return true
}

// see updates n's view of m and reports whether it changed.
func (w *world) see(n, m *node) bool {
	now := w.sched.now
	v := n.view[m.name]
	reach := m.up && w.reaches(n, m)
	if v == nil {
		if !reach {
			return false // never heard of: nothing to say
		}
		v = &memberView{state: alive, since: now}
		n.view[m.name] = v
		v.heard = now
		w.seenAlive(v, m)
		return true
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
		return true
	}
	return false
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
