package lease

import (
	"context"
	"slices"
	"time"
)

// Round sends one round of heartbeats: the node grants itself what its own table
// allows, asks the voters (targets) for the rest, and counts the
// grants as replies come in. It returns once the requests are sent; replies are counted
// as they arrive, within a lease's length (exchange).
func (k *Keeper) Round(ctx context.Context) {
	req, peers := k.Begin()
	for _, p := range peers {
		go k.exchange(ctx, p, req)
	}
}

// Begin starts a round without sending it: it returns the request to send to each of
// peers, whose replies go to Absorb. Round does this and the sending; a simulation,
// which carries the messages itself, calls it directly.
func (k *Keeper) Begin() (*Request, []Peer) {
	req, peers, lapsed := k.begin(k.wall())
	if n := lapsed.Len(); n > 0 {
		k.stats.lapsed.Add(uint64(n))
		if k.cfg.OnLapse != nil {
			k.cfg.OnLapse(lapsed)
		}
	}
	k.signal()
	return req, peers
}

// begin prepares round k.next under the lock and answers it from this node's own table;
// wall is the counters' clock as it begins (Request.SentAt).
func (k *Keeper) begin(wall int64) (*Request, []Peer, Set) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if now-k.lastRound > 2*k.cfg.Heartbeat {
		k.awake = now // rounds were missed: this node did not run
	}
	k.lastRound = now
	lapsed := k.checkLapses(now)
	k.voters.Update(k.view, now)
	k.voters.Forget(now)
	k.grantor.Forget(now - time.Minute)
	k.holder.Expire(now)
	n := k.next
	k.next++
	req := &Request{From: k.cfg.Self, Incarnation: k.cfg.Incarnation, Round: n, Claims: k.claims.Clone(),
		Drops: k.dropping.Clone(), Voters: k.voters.List(), Version: k.voters.Version(),
		Change: k.voters.ChangeMsg(), SentAt: wall}
	if k.voters.Has(k.cfg.Self) {
		// Only a voter's view of who is alive counts (Voters.agree): a member that is
		// not one leaves it out, so that its heartbeats do not grow with the fleet.
		req.Alive = k.view.Alive
	}
	// Drops go out in three rounds, then grants run out by themselves.
	if k.dropRounds++; k.dropRounds >= 3 {
		k.dropping = NewSet(k.cfg.Partitions)
	}
	k.holder.Begin(n, now, req.Voters)
	self := k.grantor.Grant(req, k.voters.Has(k.cfg.Self), now)
	k.holder.Grant(n, k.cfg.Self, self.Granted)
	k.noteHeld(self.Granted, now)
	k.retryAt = k.soonestFree(now)
	k.silentNow = k.silentMembers(now)
	targets := k.targets(now)
	k.stats.sent.Add(uint64(len(targets)))
	return req, targets, lapsed
}

// soonestFree is when the first grant here that keeps one of this node's claims from
// being granted runs out (0: none does). The other grantors got the same holder's last
// heartbeat within a network delay of this one, so theirs run out then too: a round
// sent then takes over a partition whose holder went silent without waiting up to a
// heartbeat more. The caller holds mu.
func (k *Keeper) soonestFree(now time.Duration) time.Duration {
	soonest := time.Duration(0)
	k.claims.Each(func(p int) {
		if at := k.grantor.FreeAt(p, k.cfg.Self, k.cfg.Incarnation, now); at != 0 && (soonest == 0 || at < soonest) {
			soonest = at
		}
	})
	return soonest
}

// RetryIn is how long after now a round should go, because the last one could not be
// granted a claim only for another holder's grant that runs out before the next
// heartbeat; ok is false when no such round is needed. Run sends it; a simulation
// schedules it.
func (k *Keeper) RetryIn(now time.Duration) (d time.Duration, ok bool) {
	k.mu.Lock()
	at := k.retryAt
	k.mu.Unlock()
	if at == 0 {
		return 0, false
	}
	// A grantor frees a grant once its clock passes until: a round a little after finds
	// every grantor past it, though the holder's last heartbeat reached each at a
	// slightly different time.
	d = at - now + retrySlack
	if d >= k.cfg.Heartbeat {
		return 0, false
	}
	return max(d, 0), true
}

// retrySlack is how long after the soonest blocking grant here runs out the retry round
// goes: about one network delay, for the other grantors to pass it as well.
const retrySlack = 5 * time.Millisecond

// targets are the peers to send a heartbeat: the voters, whose grants count and who
// keep the voter set (every member's report reaches them). While this node knows no
// voters, or has not heard a majority of its own for a lease's length (they may all be
// gone, replaced by voters it has not heard of), every member it can reach: one of
// them tells it the voters. The caller holds mu.
func (k *Keeper) targets(now time.Duration) []Peer {
	all := k.voters.Empty() || !k.quorate(now)
	out := make([]Peer, 0, len(k.peers))
	for _, p := range k.peers {
		if p.Name != k.cfg.Self && p.Addr != "" && (all || k.voters.Has(p.Name)) {
			out = append(out, p)
		}
	}
	return out
}

// checkLapses returns the claimed partitions held at the last check and no longer held
// now, and records which are held.
func (k *Keeper) checkLapses(now time.Duration) Set {
	lapsed := NewSet(k.cfg.Partitions)
	k.claims.Each(func(p int) {
		held := now < k.holder.DecideUntil(p)
		switch {
		case held:
			k.held.Add(p)
		case k.held.Has(p):
			k.held.Remove(p)
			lapsed.Add(p)
		}
	})
	return lapsed
}

// exchange sends req to p and absorbs its reply. A reply slower than a heartbeat still
// counts: its grants hold from when the round was sent (Holder.Grant), and it shows p
// reachable. Given up at one heartbeat, every round of a cluster whose round trips take
// longer (a slow network, or nodes starved of CPU) failed: no lease held, and each node,
// hearing no majority, answered unavailable. A reply later than a lease renews nothing.
// Rounds in flight to one peer stay about Duration/Heartbeat at most.
func (k *Keeper) exchange(ctx context.Context, p Peer, req *Request) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Duration)
	defer cancel()
	rep, err := k.cfg.Exchanger.Exchange(ctx, p.Addr, req)
	if err != nil || rep.Round != req.Round {
		k.stats.failed.Add(1)
		return
	}
	k.Absorb(p.Name, req, rep)
}

// Absorb counts the reply of the peer named name to req, a request of Begin's.
func (k *Keeper) Absorb(name string, req *Request, rep *Reply) {
	wall := k.wall()
	k.mu.Lock()
	now := k.now()
	k.noteOffset(name, req, rep, wall, now)
	k.voters.Report(name, rep.Alive, rep.Voters, rep.Version, now)
	k.heard(name, rep.Voters, now)
	if k.voters.Has(name) {
		k.silentBy[name] = heardSilent{at: now, names: rep.Silent}
		k.unfindSilent(rep.Silent)
	}
	if rep.Refused == RefusedNone && sameVoters(req, rep) {
		k.holder.Grant(req.Round, name, rep.Granted)
		k.noteHeld(rep.Granted, now)
	}
	moved := false
	if req.Change != nil && sameVoters(req, rep) {
		moved = k.voters.Answered(name, rep.Change, now)
	}
	k.mu.Unlock()
	k.signal()
	if moved {
		k.Kick() // the proposal's next phase goes now, not at the next heartbeat
	}
}

// sameVoters reports whether rep's grantor answered under the voter set req was sent
// under. A grant counts only toward a majority of the set its grantor holds: counted
// under another (a node back from a cut two voter changes late, whose old set has a
// majority that misses the new one's), two nodes could hold one partition at once
// (TestGrantUnderAnotherVoterSetDoesNotCount).
func sameVoters(req *Request, rep *Reply) bool {
	return rep.Version == req.Version && slices.Equal(rep.Voters, req.Voters)
}

// noteHeld records as held the partitions of granted this node holds now: a lease
// granted and run out between two rounds (a pause right after the grant) is then
// reported as lapsed all the same. The caller holds mu.
func (k *Keeper) noteHeld(granted Set, now time.Duration) {
	granted.Each(func(p int) {
		if k.claims.Has(p) && now < k.holder.DecideUntil(p) {
			k.held.Add(p)
		}
	})
}
