package owner

import (
	"errors"
	"slices"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/ring"
)

// The direct way of a release: its counters go to their new owners in Handoffs,
// chunked per receiver, each sent again to the same node while its answer is in doubt,
// and taken back into memory when the ring gives their partitions back (release.go has
// the way through Redis, and what both share).

// releaseDirectly makes the release send its counters to their new owners.
func (o *Owner) releaseDirectly(rel *release, rg *ring.Ring) {
	rel.byPart = map[int][]HandoffCounter{}
	for _, e := range rel.ev {
		p := rg.Partition(e.Key)
		c := HandoffCounter{Key: e.Key, Spec: e.Spec, Buckets: e.Buckets, Pending: e.Pending, Reset: e.Reset}
		if rel.partial.has(p, e.Key) {
			// Its memory lacks what Redis holds (started blind, or stale): it goes as
			// its pending part alone, which the receiver writes; it loads the rest.
			c.Buckets = nil
		}
		rel.byPart[p] = append(rel.byPart[p], c)
	}
	rel.count = len(rel.ev)
	rel.ev = nil
}

// stepDirectRelease takes back into memory the partitions the ring gives back to this node,
// starts a send to each owner of the others (the ring may have moved them since; an
// owner may refuse a partition it does not own yet: it goes again, backing off), and
// sends Handoffs in doubt again. The caller holds mu.
func (o *Owner) stepDirectRelease(rel *release) {
	now := o.cfg.Clock.Since()
	o.reclaim(rel)
	for _, name := range sortedNames(rel.sends) {
		s := rel.sends[name]
		if !s.inDoubt || s.flying || now < s.next {
			continue
		}
		if s.run != 0 && o.cfg.Leases.LeftRun(s.to.Name) == s.run {
			// The run it went to has left gracefully: had it applied the Handoff, it
			// handed its counters on as it left, and sending it again (to its next run,
			// or elsewhere) would count them twice. Taken as delivered (docs/guarantees.md).
			o.cfg.Logger.Warn("handoff in doubt to a node that left since: taken as delivered",
				"to", s.to.Name, "id", s.h.ID, "counters", len(s.h.Counters))
			if o.cfg.OnAmbiguous != nil {
				o.cfg.OnAmbiguous(s.h, true)
			}
			o.applied(rel, s)
			continue
		}
		o.sendHandoff(rel, s)
	}
	var next time.Duration // the next time something is due: a send in doubt to go again, or a new one
	later := func(at time.Duration) {
		if at > now && (next == 0 || at < next) {
			next = at
		}
	}
	var idle []int
	for _, p := range rel.parts {
		if !rel.sending(p) {
			idle = append(idle, p)
		}
	}
	for _, g := range byOwner(o.ring.Load(), idle) {
		if _, busy := rel.sends[g.m.Name]; busy || !o.runHeard(g.m.Name) {
			continue
		}
		if at := rel.refused[g.m.Name].next; now < at {
			later(at)
			continue
		}
		o.startSend(rel, g.m, g.parts)
	}
	if len(rel.parts) == 0 {
		if o.endRelease(rel) {
			o.cfg.Logger.Info("handed partitions on directly", "counters", rel.count)
		}
		return
	}
	for _, s := range rel.sends {
		if s.inDoubt && !s.flying {
			later(s.next)
		}
	}
	if next > now {
		o.stepLater(rel, next-now)
	}
}

// refusal is a receiver's backoff after it refused a send: nothing goes to it again
// before next.
type refusal struct{ wait, next time.Duration }

// refusedBackoff spaces a receiver's refusals: its ring or lease lags by a moment.
var refusedBackoff = backoff.Policy{Initial: 50 * time.Millisecond, Max: time.Second}

// after is r after one more refusal at now.
func (r refusal) after(now time.Duration) refusal {
	r.wait = refusedBackoff.Next(r.wait)
	r.next = now + r.wait
	return r
}

// sending reports whether a send is delivering p now.
func (rel *release) sending(p int) bool {
	for _, s := range rel.sends {
		if containsInt(s.parts, p) {
			return true
		}
	}
	return false
}

func sortedNames(m map[string]*send) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// reclaim takes back into memory the partitions of rel that the ring gives back to this
// node and that no send is delivering (lent, if some of their counters went elsewhere).
func (o *Owner) reclaim(rel *release) {
	var back, rest []int
	for _, p := range rel.parts {
		if o.owns(p) && !rel.sending(p) {
			back = append(back, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(back) == 0 {
		return
	}
	rel.parts = rest
	for _, p := range back {
		for _, c := range rel.byPart[p] {
			o.installCounter(&c, takenBack)
		}
		delete(rel.byPart, p)
	}
	o.addFences(back, rel.fences, o.cfg.Clock.Since())
	o.settleReleased(back, rel.lentTo)
}

// runHeard reports whether a run of the member named name that has not left was heard:
// a Handoff is sent only to such a run, and names it (Handoff.ToRun), so that one in
// doubt is meant for a run that took part, and a later run refuses it as such
// (ErrHandoffOtherRun) instead of as one it does not own; a heartbeat comes soon.
func (o *Owner) runHeard(name string) bool {
	run := o.cfg.Leases.Incarnation(name)
	return run != 0 && run != o.cfg.Leases.LeftRun(name)
}

// startSend starts delivering parts to m.
func (o *Owner) startSend(rel *release, m ring.Member, parts []int) {
	s := &send{to: m, parts: parts, wait: 20 * time.Millisecond}
	for _, p := range parts {
		s.cs = append(s.cs, rel.byPart[p]...)
	}
	rel.sends[m.Name] = s
	o.sendHandoff(rel, s)
}

// sendHandoff sends s's Handoff in doubt again, or its next chunk.
func (o *Owner) sendHandoff(rel *release, s *send) {
	if s.h == nil {
		n, size := 0, 0
		for rest := s.cs[s.done:]; n < len(rest) && (n == 0 || size+HandoffSize(&rest[n]) <= MaxHandoffBytes/2); n++ {
			size += HandoffSize(&rest[n])
		}
		// Meant for the receiver's run as last heard: sent again while in doubt, it
		// never reaches a later run, which could not know its ID (receive.go).
		s.run = o.cfg.Leases.Incarnation(s.to.Name)
		s.h = &Handoff{From: o.cfg.Self, ID: o.recv.nextID.Add(1), ToRun: s.run, Counters: s.cs[s.done : s.done+n], Fences: rel.fences,
			RedisEpoch: o.handoffRedisEpoch()}
		if s.done+n == len(s.cs) {
			s.h.Partitions = s.parts
		}
		s.n = n
	} else if rg := o.ring.Load(); s.lapsed != nil && rg != nil {
		s.h, s.lapsed = withoutResetsIn(rg, s.lapsed, s.h), nil
	}
	s.flying = true
	h := s.h
	addr := s.to.RPCAddr
	o.ask(func() {
		o.cfg.Peers.Handoff(addr, h, func(err error) {
			o.post(func() {
				o.sentHandoff(rel, s, h, err)
				o.wakeAfter()
			})
		})
	})
}

// sentHandoff goes on after a Handoff's delivery: applied, the next chunk goes (or the
// partitions are released); certainly not applied (refused, or never sent), the send
// ends and its partitions go again later, wherever the ring then says; in doubt (it
// went out and no answer came), it goes again, with its id, to the same node only,
// until that node answers: giving up would send its counters again in a new Handoff, or
// take them back, and count them twice if the first was applied. A receiver checks a
// Handoff's id before it refuses one, so a refusal then is an answer too. The caller
// holds mu.
func (o *Owner) sentHandoff(rel *release, s *send, h *Handoff, err error) {
	s.flying = false
	now := o.cfg.Clock.Since()
	switch {
	case err == nil:
		o.applied(rel, s)
	case errors.Is(err, ErrHandoffOtherRun) && s.inDoubt:
		// The run it went to is gone (restarted): had it applied the Handoff, it handed
		// its counters on as it left, or lost them as it crashed; sending them again
		// would count them twice in the first case. Taken as delivered (docs/guarantees.md).
		o.cfg.Logger.Warn("handoff in doubt to a run of a node that is gone: taken as delivered",
			"to", s.to.Name, "id", h.ID, "counters", len(h.Counters))
		if o.cfg.OnAmbiguous != nil {
			o.cfg.OnAmbiguous(h, true)
		}
		o.applied(rel, s)
	case errors.Is(err, ErrHandoffRefused) || errors.Is(err, ErrHandoffNotOwner) ||
		errors.Is(err, counter.ErrNotSent) && !s.inDoubt:
		o.cfg.Logger.Debug("handoff not delivered yet", "to", s.to.Name, "partitions", len(s.parts), "err", err)
		delete(rel.sends, s.to.Name)
		rel.refused[s.to.Name] = rel.refused[s.to.Name].after(now)
	default:
		s.inDoubt = true
		s.wait = min(2*s.wait, time.Second)
		s.next = now + s.wait
		if _, in := o.ring.Load().Member(s.to.Name); in {
			s.outSince = 0
		} else if s.outSince == 0 {
			s.outSince = max(now, 1)
		} else if now-s.outSince > goneAfter {
			// Most likely crashed, its memory with what it applied; waiting longer keeps
			// these partitions from being decided anywhere.
			o.cfg.Logger.Warn("handoff in doubt to a node out of the ring: its counters go where the ring says (counted twice should that node come back having applied it)",
				"to", s.to.Name, "id", h.ID, "counters", len(h.Counters))
			if o.cfg.OnAmbiguous != nil {
				o.cfg.OnAmbiguous(h, false)
			}
			delete(rel.sends, s.to.Name)
		}
	}
	o.stepDirectRelease(rel)
}

// applied records that s's Handoff was applied at its receiver: its counters leave
// byPart (their partitions' counters went there: lentTo), and the next chunk goes, or,
// after the last, the partitions are released.
func (o *Owner) applied(rel *release, s *send) {
	sent := s.n
	for _, p := range s.parts {
		k := min(sent, len(rel.byPart[p]))
		if k > 0 {
			rel.lentTo[p] = s.to.Name
		}
		rel.byPart[p] = rel.byPart[p][k:]
		sent -= k
	}
	s.done += s.n
	s.h, s.n, s.inDoubt, s.outSince, s.wait, s.run = nil, 0, false, 0, 20*time.Millisecond, 0
	if s.done < len(s.cs) {
		o.sendHandoff(rel, s)
		return
	}
	delete(rel.sends, s.to.Name)
	rel.parts = remove(rel.parts, s.parts)
	lent := map[int]string{}
	for _, p := range s.parts {
		if to, ok := rel.lentTo[p]; ok {
			lent[p] = to
		}
		delete(rel.byPart, p)
	}
	o.settleReleased(s.parts, lent)
}
