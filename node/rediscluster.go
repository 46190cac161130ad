package node

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/hashslot"
	"github.com/leapcount/leapcount/respapi"
	"github.com/leapcount/leapcount/ring"
)

// topologyMaxAge bounds how long a slot map is reused while the ring stays the same:
// a member's client address can change without changing the ring (a restart on
// another port).
const topologyMaxAge = time.Second

// redisCluster answers the Redis Cluster protocol of the RESP front end from the
// node's ring and the client addresses members gossip (respapi.Cluster).
type redisCluster struct {
	n      *Node
	settle time.Duration // how long a new ring is used before keys are redirected by it
	cache  atomic.Pointer[slotMap]

	leaving  atomic.Bool  // the node has handed its keys on: redirect at once (see handOver)
	lastCall atomic.Int64 // unix ns of the last Redirect: the last op of a cluster client
}

// slotMap is the topology of one ring, with where each owner takes clients.
type slotMap struct {
	ring  *ring.Ring
	since time.Time // when this node began to use ring
	built time.Time
	addrs map[string]string // member name → client address
	topo  *respapi.Topology
}

// Topology is the slot map of the ring in use.
func (rc *redisCluster) Topology() *respapi.Topology { return rc.current().topo }

// Redirect says where a cluster client must send key: to its owner when that is
// another member that takes cluster clients; else it is decided here (forwarded if
// need be), as for any client. While the ring is new (for a lease's length after it
// changed) nothing is redirected: other members may not have the same ring yet, and
// two members that each name the other would bounce a client between them until it
// gives up; forwarding decides the op exactly whatever the rings say.
func (rc *redisCluster) Redirect(key []byte) (uint16, string, bool) {
	rc.lastCall.Store(time.Now().UnixNano())
	m := rc.current()
	slot := hashslot.Of(key)
	if m.ring == nil || (!rc.leaving.Load() && time.Since(m.since) < rc.settle) {
		return slot, "", false
	}
	owner, ok := m.ring.OwnerBytes(key)
	if !ok || owner.Name == rc.n.cfg.Name {
		return slot, "", false
	}
	addr := m.addrs[owner.Name]
	return slot, addr, addr != ""
}

// current returns the slot map of the ring in use, building it when the ring changed
// or the map is older than topologyMaxAge. Concurrent callers may build it twice;
// either result is right.
func (rc *redisCluster) current() *slotMap {
	rg := rc.n.router.Ring()
	old := rc.cache.Load()
	if old != nil && old.ring == rg && time.Since(old.built) < topologyMaxAge {
		return old
	}
	m := rc.build(rg)
	if old != nil && old.ring == rg {
		m.since = old.since
	}
	rc.cache.Store(m)
	return m
}

func (rc *redisCluster) build(rg *ring.Ring) *slotMap {
	now := time.Now()
	m := &slotMap{ring: rg, since: now, built: now, addrs: map[string]string{}}
	for _, mem := range rc.n.cluster.Members() {
		if mem.ClientAddr != "" {
			m.addrs[mem.Name] = mem.ClientAddr
		}
	}
	self := rc.n.cfg.Name
	m.addrs[self] = rc.n.advertisedClient()
	t := &respapi.Topology{Self: -1}
	index := map[string]int{}
	if rg != nil {
		t.Epoch = rg.Epoch()
		for _, mem := range rg.Members() {
			index[mem.Name] = len(t.Nodes)
			t.Nodes = append(t.Nodes, clusterNode(mem.Name, m.addrs[mem.Name]))
		}
		for _, r := range rg.SlotRanges() {
			t.Ranges = append(t.Ranges, respapi.SlotRange{First: r.First, Last: r.Last, Node: index[r.Owner.Name]})
		}
	}
	if i, ok := index[self]; ok {
		t.Self = i
	} else { // not a voter yet: listed, without slots
		t.Self = len(t.Nodes)
		t.Nodes = append(t.Nodes, clusterNode(self, m.addrs[self]))
	}
	m.topo = t
	return m
}

func clusterNode(name, addr string) respapi.ClusterNode {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return respapi.ClusterNode{ID: respapi.NodeID(name), Host: host, Port: p}
}

// advertisedClient is where Redis Cluster clients reach this node: --resp-cluster-
// advertise, else the advertised host (or the bind host) and the --resp-cluster (or
// --resp-cluster-tls) port, or the --resp port when there is no cluster listener
// (clients then get answers by forwarding, never -MOVED), or --resp-tls's without
// --resp; "" with no RESP listener at all.
func (n *Node) advertisedClient() string {
	if n.cfg.RESPClusterAdvertise != "" && n.respClusterLn != nil {
		return n.cfg.RESPClusterAdvertise
	}
	var ln net.Listener
	for _, l := range []net.Listener{n.respClusterLn, n.respLn, n.respTLSLn} {
		if l != nil {
			ln = l
			break
		}
	}
	if ln == nil {
		return ""
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if n.cfg.Advertise != "" {
		host = n.cfg.Advertise
	} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host, _, _ = net.SplitHostPort(n.advertisedRPC())
	}
	return net.JoinHostPort(host, port)
}

// redirectAll sends every key of a cluster client to its owner by the ring in use, new
// or not: the node is leaving and its peers route elsewhere already.
func (rc *redisCluster) redirectAll() { rc.leaving.Store(true) }

// clientsQuiet is how long cluster clients must send nothing before a leaving node
// takes it that they have all followed its redirects.
const clientsQuiet = 300 * time.Millisecond

// handOverMin is the least time a leaving node redirects cluster clients for.
const handOverMin = time.Second

// handOver, once the node has drained (its ring no longer holds it), redirects every
// key of a cluster client to its new owner at once, and waits (bounded by ctx) until
// cluster clients stop sending: each has then been told where its keys went, rather
// than finding this node's port closed with its slot map still naming it. The new
// owners have the new ring by then (drain waited for peers to stop forwarding), so
// they decide what is redirected to them rather than send it back.
func (rc *redisCluster) handOver(ctx context.Context) {
	rc.redirectAll()
	began := time.Now()
	// At least handOverMin: on a loaded host clients may be slower than clientsQuiet
	// between two calls, and one that has not heard a redirect yet keeps this node in
	// its slot map (TestRedisClusterClientFollowsMembershipChanges at load 8).
	for time.Since(began) < handOverMin || time.Since(time.Unix(0, rc.lastCall.Load())) < clientsQuiet {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
