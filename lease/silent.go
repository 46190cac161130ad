package lease

import (
	"slices"
	"time"
)

// Silent reports whether the member named name can renew no lease: it crashed, froze or
// was cut off, whatever gossip says of it yet. Between this node and a voter (either
// way) heartbeats pass directly: name is silent when this node once exchanged
// heartbeats with it and none passed between them for a lease's length before now
// (silentHere). Two members that are not voters exchange none: name is silent when a
// majority of the voters said so in their latest replies, fresh within a lease's
// length; without that majority it can hold nothing.
//
// Only the time since both could talk counts: since is when this node last saw the
// member appear (its gossip state or run began then; 0: unknown), and one that was
// frozen (or starved) itself hears nobody meanwhile, through no fault of theirs. Each
// gets a lease's length from then: a member that restarts is not silent before its
// first heartbeat could come.
//
// A member found silent before this node froze stays silent through the freeze until it
// is heard again (stillSilent): the freeze excuses only the members that went quiet
// during it.
func (k *Keeper) Silent(name string, since, now time.Duration) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if name == k.cfg.Self {
		return false
	}
	if now-max(since, k.awakeAt(now)) <= k.cfg.Duration {
		return k.stillSilent(name, since)
	}
	silent := false
	if k.votersPair(name) {
		silent = k.silentHere(name, now)
	} else {
		n := 0
		for voter, r := range k.silentBy {
			if k.voters.Has(voter) && now-r.at <= k.cfg.Duration && slices.Contains(r.names, name) {
				n++
			}
		}
		silent = n >= k.voters.Quorum()
	}
	if _, found := k.foundSilent[name]; silent && !found {
		k.foundSilent[name] = now
	}
	return silent
}

// votersPair reports whether heartbeats pass between this node and name: one of them is
// a voter (or there are none yet). The caller holds mu.
func (k *Keeper) votersPair(name string) bool {
	return k.voters.Has(k.cfg.Self) || k.voters.Has(name) || k.voters.Empty()
}

// stillSilent reports whether Silent found name silent, and nothing since says
// otherwise: no heartbeat of it passed, no voter's reply left it out, and gossip saw it
// appear (since) a lease's length or more before (not a new run, which has had no time
// to send one). Taking such a member back into the ring as this node ran again after a
// freeze moved its partitions to it, where nothing could be decided, and back a lease
// later. The caller holds mu.
func (k *Keeper) stillSilent(name string, since time.Duration) bool {
	at, ok := k.foundSilent[name]
	return ok && since <= at-k.cfg.Duration
}

// unfindSilent forgets, of the members found silent between two that are not voters, those
// a voter's reply does not say are silent. The caller holds mu.
func (k *Keeper) unfindSilent(silent []string) {
	for name := range k.foundSilent {
		if !k.votersPair(name) && !slices.Contains(silent, name) {
			delete(k.foundSilent, name)
		}
	}
}

// heardSilent is a voter's Reply.Silent, and when it came.
type heardSilent struct {
	at    time.Duration
	names []string
}

// awakeAt is when this node last began to run after missing rounds (frozen or
// starved): it heard nobody before. The caller holds mu.
func (k *Keeper) awakeAt(now time.Duration) time.Duration {
	if now-k.lastRound > 2*k.cfg.Heartbeat {
		return now // it has just run again, and not begun a round yet
	}
	return k.awake
}

// silentHere reports whether this node once exchanged heartbeats with name and none
// passed between them for a lease's length before now. Heartbeats pass between a voter
// and every member, not between two members that are not voters: each pair gets a
// lease's length from when this node took its voter set (one that made it, or name, a
// voter only just now heard nothing of name while neither was one). The caller holds mu.
func (k *Keeper) silentHere(name string, now time.Duration) bool {
	last := k.lastHeard[name]
	if name == k.cfg.Self || last == 0 || now-max(last, k.voters.since) <= k.cfg.Duration {
		return false
	}
	if now-k.awakeAt(now) <= k.cfg.Duration {
		return k.stillSilent(name, 0) // this node ran again only just now
	}
	return true
}

// silentMembers lists the members silentHere, for this node's replies as a voter.
// The caller holds mu.
func (k *Keeper) silentMembers(now time.Duration) []string {
	if !k.voters.Has(k.cfg.Self) {
		return nil
	}
	var out []string
	for name := range k.lastHeard {
		if k.silentHere(name, now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
