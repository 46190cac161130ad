package lease

import "time"

// Grantor is one node's table of grants: per partition, who holds it and until when (on
// this node's clock). It is not safe for concurrent use; Keeper serializes calls.
type Grantor struct {
	cfg    Config
	starts time.Duration // grants are refused before this: an earlier run may have granted
	parts  []grant
	// latest is each member's newest round seen, so that a request overtaken by a newer
	// one (a reconnect can reorder them) is not applied after it: its drops would
	// end grants the newer request renewed. Only members are granted anything, so only
	// theirs are kept.
	latest map[string]seenRound
}

// seenRound is the newest round of one sender's run that a grantor answered.
type seenRound struct {
	inc   uint64
	round uint64
	at    time.Duration
}

type grant struct {
	name  string
	inc   uint64
	until time.Duration // on the Keeper's Clock; 0: nobody
}

// NewGrantor returns the grant table of a node that started at now (the Keeper's Clock), for
// partitions partitions. With quarantine it grants nothing for one grant's length: a
// node that joins a cluster may have run before and granted partitions it no longer
// remembers. A node that founds a cluster alone needs no quarantine.
func NewGrantor(cfg Config, partitions int, now time.Duration, quarantine bool) *Grantor {
	cfg = cfg.WithDefaults()
	g := &Grantor{cfg: cfg, starts: now, parts: make([]grant, partitions), latest: map[string]seenRound{}}
	if quarantine {
		g.starts += cfg.hold()
	}
	return g
}

// Grant answers a heartbeat at now. isMember says whether the sender is a voter or a
// member alive here; anyone else is granted nothing (but its drops are honoured): anyone
// who reaches the rpc port may send a heartbeat, under any name. Voters or not, members
// are granted alike: a grant's safety is this table's (one holder a partition at a
// time), and a grant counts toward a lease only from a voter (Holder).
func (g *Grantor) Grant(req *Request, isMember bool, now time.Duration) Reply {
	rep := Reply{Round: req.Round}
	if len(req.Claims) != 0 && len(req.Claims) != setWords(len(g.parts)) {
		rep.Refused = RefusedWrongShape
		return rep
	}
	if isMember && !g.newest(req, now) {
		rep.Granted = NewSet(len(g.parts))
		return rep // overtaken: a newer round of the sender's was answered already
	}
	req.Drops.Each(func(p int) {
		if p < len(g.parts) && g.parts[p].is(req.From, req.Incarnation) {
			g.parts[p] = grant{}
		}
	})
	switch {
	case now < g.starts:
		rep.Refused = RefusedStarting
		return rep
	case !isMember:
		rep.Refused = RefusedNotMember
		return rep
	}
	rep.Granted = NewSet(len(g.parts))
	until := now + g.cfg.hold()
	req.Claims.Each(func(p int) {
		if p >= len(g.parts) {
			return
		}
		cur := &g.parts[p]
		if cur.until <= now || cur.is(req.From, req.Incarnation) {
			*cur = grant{name: req.From, inc: req.Incarnation, until: until}
			rep.Granted.Add(p)
		}
	})
	return rep
}

// newest records req's round as its sender's newest and reports whether it is: a
// request of an older round of the same run is stale. (Another run's requests touch
// only that run's grants.)
func (g *Grantor) newest(req *Request, now time.Duration) bool {
	if cur, ok := g.latest[req.From]; ok && req.Incarnation == cur.inc && req.Round < cur.round {
		return false
	}
	g.latest[req.From] = seenRound{inc: req.Incarnation, round: req.Round, at: now}
	return true
}

// Forget drops what it knows of senders not heard from since before, so that the
// table holds only the members that send heartbeats now.
func (g *Grantor) Forget(before time.Duration) {
	for name, r := range g.latest {
		if r.at < before {
			delete(g.latest, name)
		}
	}
}

// FreeAt is when p's grant here to another holder than name's run inc runs out, or 0
// when nothing here stands in the way of granting p to that run at now.
func (g *Grantor) FreeAt(p int, name string, inc uint64, now time.Duration) time.Duration {
	if cur := g.parts[p]; cur.until > now && !cur.is(name, inc) {
		return cur.until
	}
	return 0
}

// Holder names who holds p here at now ("" if nobody).
func (g *Grantor) Holder(p int, now time.Duration) string {
	if p < 0 || p >= len(g.parts) || g.parts[p].until <= now {
		return ""
	}
	return g.parts[p].name
}

func (gr grant) is(name string, inc uint64) bool { return gr.name == name && gr.inc == inc }
