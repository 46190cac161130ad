package node

import (
	"context"
	"github.com/leapcount/leapcount/internal/buildinfo"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/route"
)

// joinCluster starts gossip, advertising this node's RPC address, and the lease keeper.
func (n *Node) joinCluster() error {
	c, err := cluster.Start(cluster.Config{
		Name:           n.cfg.Name,
		BindAddr:       n.cfg.GossipAddr,
		AdvertiseAddr:  n.cfg.Advertise,
		RPCAddr:        n.advertisedRPC(),
		ClientAddr:     n.advertisedClient(),
		Join:           n.cfg.Join,
		LookupHost:     n.cfg.LookupHost,
		Registry:       n.registry(),
		RejoinInterval: n.cfg.RejoinInterval,
		Timings:        n.cfg.GossipTimings,
		Transport:      n.cfg.GossipTransport,
		Incarnation:    n.incarnation,
		Keys:           n.cfg.GossipKeys,
		Label:          n.cfg.clusterLabel(),
		Zone:           n.cfg.Zone,
		Features:       n.features(),
		Version:        shortVersion(buildinfo.Read().Version),
		Logger:         n.cfg.Logger.With("component", "gossip"),
	})
	if err != nil {
		return &ConfigError{"gossip", err.Error()}
	}
	n.cluster = c
	// No ring until joined: a ring of this node alone would make it own everything. A
	// node with no one to join is the whole cluster: it is ready before Start returns.
	if !n.cfg.hasSeeds() {
		n.syncMembership()
		n.setJoined()
	}
	n.loops.Add(1)
	go n.watchMembership()
	return nil
}

// setJoined marks the node joined: its router takes client ops from now on.
func (n *Node) setJoined() {
	n.joined.Store(true)
	n.router.SetAdmission(route.Admitting)
}

// startLeases starts the heartbeats that grant and renew partition leases; they go on
// until the node has left.
func (n *Node) startLeases() {
	ctx, cancel := context.WithCancel(context.Background())
	n.stopLeases = cancel
	n.leaseLoop.Add(1)
	go func() { defer n.leaseLoop.Done(); n.keeper.Run(ctx) }()
}

// advertisedRPC is the RPC address peers dial: the advertised host (or the bind host)
// and the port actually bound.
func (n *Node) advertisedRPC() string {
	host, _, _ := net.SplitHostPort(n.cfg.RPCAddr)
	if n.cfg.Advertise != "" {
		host = n.cfg.Advertise
	}
	_, port, _ := net.SplitHostPort(n.rpcLn.Addr().String())
	return net.JoinHostPort(host, port)
}

// aloneWait is how long a node whose seeds are only itself (a StatefulSet's first pod,
// alone in its Service) waits, once joined, before it founds a cluster alone: members
// that start with it have this long to appear.
const aloneWait = 5 * time.Second

// watchMembership follows membership and the voters: it tells the lease keeper what
// gossip says, and rebuilds the ring when the members that serve change, until gossip
// shuts down (it must go on while the node leaves: its own ring then drops it).
func (n *Node) watchMembership() {
	defer n.loops.Done()
	joined := n.cluster.Joined()
	var joinedAt time.Time
	tick := time.NewTicker(n.keeperTick())
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case _, ok := <-n.cluster.Changes():
			if !ok {
				return
			}
		case <-joined:
			joined = nil // closed for good: select on it once
			joinedAt = time.Now()
		}
		if !joinedAt.IsZero() && (!n.joined.Load() || !n.keeper.HasVoters()) && n.seesCluster(joinedAt) {
			n.setJoined()
		}
		if n.joined.Load() {
			n.syncMembership()
		}
	}
}

func (n *Node) keeperTick() time.Duration { return n.cfg.Lease.WithDefaults().Heartbeat / 2 }

// seesCluster reports whether a node that has joined knows its cluster well enough to
// serve: it sees another member, or has waited aloneWait in vain (its seeds were only
// itself). It also founds a new cluster when that is this node's to do (mayFound).
func (n *Node) seesCluster(joinedAt time.Time) bool {
	alive := n.cluster.Alive()
	n.noteSeen()
	if n.mayFound(alive, joinedAt) {
		names := make([]string, 0, len(alive))
		for _, m := range alive {
			names = append(names, m.Name)
		}
		n.keeper.Found(names...)
		n.cfg.Logger.Info("founding a new cluster: no member seen has voters", "members_seen", len(alive))
	}
	if time.Since(joinedAt) > aloneWait {
		return true
	}
	for _, m := range alive {
		if m.Name != n.cfg.Name {
			return true
		}
	}
	return false
}

// mayFound reports whether this node founds a new cluster now: it knows no voters, has
// the smallest name gossip ever showed it (one that saw a smaller member and lost it,
// cut off say, must not found a second cluster beside that member's), sees every seed
// alive, and every member it sees told it, in a heartbeat, that it knows no voters
// either. A seed it cannot reach may be the one member that still holds the cluster
// (the others restarted), so it waits for every seed; and a node whose seeds are only
// itself waits aloneWait for others to appear.
func (n *Node) mayFound(alive []cluster.Member, joinedAt time.Time) bool {
	if n.keeper.HasVoters() || n.cfg.Name > n.smallestSeen || !n.cluster.SeesEverySeed() {
		return false
	}
	names := make([]string, 0, len(alive))
	for _, m := range alive {
		names = append(names, m.Name)
	}
	if len(names) <= 1 && time.Since(joinedAt) <= aloneWait {
		return false
	}
	return n.keeper.NoneHaveVoters(names)
}

// noteSeen keeps the smallest member name gossip has shown this node so far.
func (n *Node) noteSeen() {
	if n.smallestSeen == "" {
		n.smallestSeen = n.cfg.Name
	}
	for _, m := range n.cluster.Members() {
		n.smallestSeen = min(n.smallestSeen, m.Name)
	}
}

// syncMembership tells the keeper what gossip says, forgets the connections of members
// gone (connectionDone), marks down peers that stopped answering heartbeats, and
// rebuilds the ring.
func (n *Node) syncMembership() {
	members := n.cluster.Members()
	n.logMemberChanges(members)
	now := n.clock.Since()
	view := lease.View{DeadSince: map[string]time.Duration{}, LeftRuns: map[string]uint64{}, Runs: map[string]uint64{}, Zones: map[string]string{}}
	var peers []lease.Peer
	live := map[string]bool{}
	leavers := map[string]bool{}
	for _, m := range members {
		if m.State == cluster.StateLeaving || m.State == cluster.StateLeft {
			leavers[m.Name] = true
		}
		switch m.State {
		case cluster.StateAlive, cluster.StateLeaving:
			view.Alive = append(view.Alive, m.Name)
			view.Runs[m.Name] = m.Incarnation
			if m.Zone != "" {
				view.Zones[m.Name] = m.Zone
			}
			if m.State == cluster.StateLeaving {
				view.Leaving = append(view.Leaving, m.Name)
			}
			peers = append(peers, lease.Peer{Name: m.Name, Addr: m.RPCAddr})
			live[m.RPCAddr] = true
		case cluster.StateLeft:
			view.Left = append(view.Left, m.Name)
			view.LeftRuns[m.Name] = m.Incarnation
		case cluster.StateDead:
			view.DeadSince[m.Name] = now - time.Since(m.Since)
		}
	}
	n.leavers.Store(&leavers) // before the ring is rebuilt: the owner reads it then
	n.keeper.SetView(view, peers)
	for _, m := range members {
		if m.RPCAddr != "" && !live[m.RPCAddr] && n.connectionDone(m) {
			n.rpcClient.Forget(m.RPCAddr)
		}
	}
	n.markSilentPeers(members, now)
	n.rebuildRing()
}

// connectionDone reports whether the connection to m, a member gossip lists gone, may be
// dropped. A member that left drained first: nothing is in flight to it. One listed dead
// may be alive (a busy host's probes time out), and dropping its connection would turn
// the answers it still sends to calls in flight into "outcome unknown": it is dropped
// once any such call has met its own timeout.
func (n *Node) connectionDone(m cluster.Member) bool {
	switch m.State {
	case cluster.StateLeft:
		return true
	case cluster.StateDead:
		return time.Since(m.Since) >= n.cfg.RPC.WithDefaults().Timeout
	}
	return false
}

// silent reports whether m has gone silent (lease.Keeper.Silent), counting from when
// gossip last saw its state or run begin.
func (n *Node) silent(m cluster.Member, now time.Duration) bool {
	return n.keeper.Silent(m.Name, now-time.Since(m.Since), now)
}

// markSilentPeers makes forwards to a peer that has not answered a heartbeat for a
// lease's length fail at once, unsent, rather than wait for a timeout with an unknown
// outcome: such a peer cannot renew its own leases with this node either.
func (n *Node) markSilentPeers(members []cluster.Member, now time.Duration) {
	for _, m := range members {
		if (m.State == cluster.StateAlive || m.State == cluster.StateLeaving) && m.RPCAddr != "" && n.silent(m, now) {
			n.rpcClient.MarkDown(m.RPCAddr, time.Now().Add(2*n.keeperTick()))
		}
	}
}

// rebuildRing places partitions on the members that serve now, voters or not, that
// have not gone silent (lease.Keeper.Silent): a member that can renew no lease holds
// none, so its partitions move on as its leases lapse, without waiting for gossip to
// declare it dead. Every node computes the same ring from the same members (package
// ring). A ring is built only when those members changed.
func (n *Node) rebuildRing() {
	voters := n.keeper.Voters()
	if v := n.keeper.VotersVersion(); v != n.votersLogged {
		n.votersLogged = v
		n.cfg.Logger.Info("voters changed", "version", v, "voters", voters)
	}
	now := n.clock.Since()
	var members []ring.Member
	var placed []cluster.Member
	var silent []string
	for _, m := range n.cluster.Alive() {
		if !n.admitted(m, voters) {
			continue
		}
		if n.silent(m, now) {
			silent = append(silent, m.Name)
			continue
		}
		members = append(members, ring.Member{Name: m.Name, RPCAddr: m.RPCAddr})
		placed = append(placed, m)
	}
	cfg := placementFor(placed, n.cfg.partitions())
	if len(members) == 0 || slices.Equal(members, n.ringMembers) && cfg == n.ringConfig {
		return
	}
	n.ringMembers, n.ringConfig = members, cfg
	n.ringBuilds.Add(1)
	rg := ring.New(members, cfg)
	old := n.router.Ring()
	if old != nil && old.Epoch() == rg.Epoch() {
		return
	}
	// The owner learns first: partitions it gains are claimed, partitions it loses stop
	// being decided here, before the router sends it ops by the new ring.
	n.owner.SetRing(rg)
	n.router.SetRing(rg)
	n.cfg.Logger.Info("ring changed", "epoch", epochString(rg), "placement", rg.Config().Placement, "members", len(members), "moved_partitions", len(ring.Moved(old, rg)), "silent", silent)
}

// admitted reports whether m takes partitions: it is a voter, or gossip has shown it
// (this run of it) alive for a lease's length. A member that joins and leaves again
// at once, or cannot stay up, is never handed counters it would only hand back: before
// the voters were bounded, joining the voters took that long, and the ring held voters
// alone. Every node sees the same (within gossip's delay), and itself too.
func (n *Node) admitted(m cluster.Member, voters []string) bool {
	_, voter := slices.BinarySearch(voters, m.Name)
	return voter || time.Since(m.Since) >= n.cfg.Lease.WithDefaults().Duration
}

// RingBuilds is how many times the node has rebuilt its ring (for tests and metrics).
func (n *Node) RingBuilds() int64 { return n.ringBuilds.Load() }

// memberView lists members for GET /v1/cluster, with each one's share of partitions.
func (n *Node) memberView() []MemberView {
	rg := n.router.Ring()
	var shares map[string]int
	if rg != nil {
		shares = rg.Shares()
	}
	voters := n.keeper.Voters()
	granted := n.keeper.GrantCounts()
	var out []MemberView
	for _, m := range n.cluster.Members() {
		_, voter := slices.BinarySearch(voters, m.Name)
		out = append(out, MemberView{Name: m.Name, Addr: m.Addr, RPC: m.RPCAddr, State: m.State.String(),
			Version: m.Version, Partitions: shares[m.Name], Leased: granted[m.Name], Incarnation: strconv.FormatUint(m.Incarnation, 10), Voter: voter, Zone: m.Zone})
	}
	return out
}

// epochString is how a ring epoch is shown, in logs and in GET /v1/cluster.
func epochString(rg *ring.Ring) string { return strconv.FormatUint(rg.Epoch(), 16) }

// logMemberChanges logs one line per member whose state changed since the last call
// (the membership loop alone calls it, so memberStates needs no lock).
func (n *Node) logMemberChanges(members []cluster.Member) {
	if n.memberStates == nil {
		n.memberStates = map[string]cluster.State{}
	}
	for _, m := range members {
		was, known := n.memberStates[m.Name]
		if known && was == m.State {
			continue
		}
		n.memberStates[m.Name] = m.State
		if m.Name == n.cfg.Name && !known {
			continue // this node itself, as it starts
		}
		lvl, prev := slog.LevelInfo, "new"
		if known {
			prev = was.String()
		}
		if m.State == cluster.StateDead {
			lvl = slog.LevelWarn
		}
		n.cfg.Logger.Log(context.Background(), lvl, "member "+m.State.String(), "member", m.Name, "was", prev, "gossip", m.Addr)
		n.memberChanges.WithLabelValues(m.State.String()).Inc()
	}
}

// shortVersion bounds a version to what gossip carries (cluster.Config.Version).
func shortVersion(v string) string {
	if len(v) > 64 {
		return v[:64]
	}
	return v
}

// leftGracefully reports whether gossip shows the member named leaving or left
// (owner.Config.Leaving).
func (n *Node) leftGracefully(name string) bool {
	m := n.leavers.Load()
	return m != nil && (*m)[name]
}
