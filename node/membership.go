package node

import (
	"net"
	"strconv"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/ring"
)

// joinCluster starts gossip, advertising this node's RPC address.
func (n *Node) joinCluster() error {
	c, err := cluster.Start(cluster.Config{
		Name:           n.cfg.Name,
		BindAddr:       n.cfg.GossipAddr,
		AdvertiseAddr:  n.cfg.Advertise,
		RPCAddr:        n.advertisedRPC(),
		Join:           n.cfg.Join,
		RejoinInterval: n.cfg.RejoinInterval,
		Timings:        n.cfg.GossipTimings,
		Logger:         n.cfg.Logger.With("component", "gossip"),
	})
	if err != nil {
		return &ConfigError{"gossip", err.Error()}
	}
	n.cluster = c
	// No ring until joined: a ring of this node alone would make it own everything, and
	// the partitions it really gains would then look like partitions it already had. A
	// node with no one to join is the whole cluster: it is ready before Start returns.
	if len(n.cfg.Join) == 0 {
		n.rebuildRing()
		n.joined.Store(true)
	}
	n.loops.Add(1)
	go n.watchMembership()
	return nil
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

// aloneWait is how long a node with seeds waits, once joined, to see another member
// before it takes itself to be alone (its seeds were only itself).
const aloneWait = 5 * time.Second

// watchMembership rebuilds the ring whenever membership changes, until gossip shuts
// down (it must go on while the node leaves: its own ring then drops it).
func (n *Node) watchMembership() {
	defer n.loops.Done()
	joined := n.cluster.Joined()
	var joinedAt time.Time
	refutes := n.cluster.Refutes()
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-check.C:
			// Peers suspected this node or declared it dead: they may have decided its
			// counters meanwhile, so what it holds is stale until reloaded.
			if r := n.cluster.Refutes(); r != refutes {
				refutes = r
				n.owner.Forget()
			}
		case _, ok := <-n.cluster.Changes():
			if !ok {
				return
			}
		case <-joined:
			joined = nil // closed for good: select on it once
			joinedAt = time.Now()
		}
		if n.joined.Load() {
			n.rebuildRing()
		} else if !joinedAt.IsZero() && n.seesCluster(joinedAt) {
			n.rebuildRing()
			n.joined.Store(true)
		}
	}
}

// seesCluster reports whether a node that has joined knows its cluster well enough for
// a first ring. With seeds, that means seeing another member: a join returns before
// gossip has told this node who else is there, and a first ring of this node alone
// would make it take the partitions it gains for partitions it already had (and skip
// waiting for their handoff).
func (n *Node) seesCluster(joinedAt time.Time) bool {
	if len(n.cfg.Join) == 0 || time.Since(joinedAt) > aloneWait {
		return true
	}
	for _, m := range n.cluster.Alive() {
		if m.Name != n.cfg.Name {
			return true
		}
	}
	return false
}

// rebuildRing places partitions on the members that serve now. Every node computes the
// same ring from the same member set (package ring).
func (n *Node) rebuildRing() {
	n.ringBuilds.Add(1)
	alive := n.cluster.Alive()
	members := make([]ring.Member, 0, len(alive))
	for _, m := range alive {
		members = append(members, ring.Member{Name: m.Name, RPCAddr: m.RPCAddr})
	}
	rg := ring.New(members, ring.Config{})
	old := n.router.Ring()
	if old != nil && old.Epoch() == rg.Epoch() {
		return
	}
	// The owner learns first: partitions this node gains wait for their handoff before
	// the router sends it their ops; partitions it loses stop being decided here.
	n.owner.RingChanged(old, rg, n.memberUp)
	n.router.SetRing(rg)
	n.cfg.Logger.Info("ring changed", "epoch", epochString(rg), "members", len(members), "moved_partitions", len(ring.Moved(old, rg)))
}

// memberUp reports whether the named member is still running (alive, or leaving and
// handing its counters on), so that a new owner waits for its handoff.
func (n *Node) memberUp(name string) bool {
	for _, m := range n.cluster.Members() {
		if m.Name == name {
			return m.State == cluster.StateAlive || m.State == cluster.StateLeaving
		}
	}
	return false
}

// departed lists members that left or died.
func (n *Node) departed() []string {
	if n.cluster == nil {
		return nil
	}
	var out []string
	for _, m := range n.cluster.Members() {
		if m.State == cluster.StateLeft || m.State == cluster.StateDead {
			out = append(out, m.Name)
		}
	}
	return out
}

// RingBuilds is how many times the node has rebuilt its ring (for tests and metrics).
func (n *Node) RingBuilds() int64 { return n.ringBuilds.Load() }

// memberView lists members for GET /v1/cluster, with each one's share of partitions.
func (n *Node) memberView() []member {
	rg := n.router.Ring()
	var shares map[string]int
	if rg != nil {
		shares = rg.Shares()
	}
	var out []member
	for _, m := range n.cluster.Members() {
		out = append(out, member{Name: m.Name, Addr: m.Addr, RPC: m.RPCAddr, State: m.State.String(),
			Partitions: shares[m.Name], Incarnation: strconv.FormatUint(m.Incarnation, 10)})
	}
	return out
}

// epochString is how a ring epoch is shown, in logs and in GET /v1/cluster.
func epochString(rg *ring.Ring) string { return strconv.FormatUint(rg.Epoch(), 16) }
