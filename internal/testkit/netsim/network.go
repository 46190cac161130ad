package netsim

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Network is one simulated network. Its methods are safe for concurrent use.
type Network struct {
	// mu guards everything below. Lock order: mu, then a pipe's mu; a pipe never takes
	// mu, so the network can push fault changes into live streams while holding it.
	mu        sync.Mutex
	listeners map[string]*listener  // by canonical "host:port": Listen and Transport
	packets   map[string]*transport // by canonical "host:port": Transport only
	streams   map[*stream]struct{}  // open streams, for fault changes and Reset
	hosts     map[string]bool       // every host that listened, dialled or bound: Isolate's "every other host"
	cuts      map[link]bool         // both directions of each cut pair
	holds     map[link]bool
	drops     map[link]bool // packets only: DropPackets
	delays    map[link]time.Duration
	changed   chan struct{} // closed and replaced when a fault changes: hanging dials look again
	nextPort  int           // where the search for a free port starts (Listen with port 0)
	nextEphem int           // the next local port of a dialled stream
}

// link is one direction between two hosts.
type link struct{ from, to string }

const (
	firstAutoPort  = 30000
	firstEphemPort = 49152
)

// New returns an empty network: no listeners, no faults.
func New() *Network {
	return &Network{
		listeners: make(map[string]*listener),
		packets:   make(map[string]*transport),
		streams:   make(map[*stream]struct{}),
		hosts:     make(map[string]bool),
		cuts:      make(map[link]bool),
		holds:     make(map[link]bool),
		drops:     make(map[link]bool),
		delays:    make(map[link]time.Duration),
		changed:   make(chan struct{}),
		nextPort:  firstAutoPort,
		nextEphem: firstEphemPort,
	}
}

// Addr is a netsim address. Packets' From and conns' and listeners' addresses are
// Addrs; String gives "host:port".
type Addr struct {
	Host string
	Port int
}

// Network returns "netsim".
func (a Addr) Network() string { return "netsim" }

func (a Addr) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// parseAddr splits "host:port", canonicalising the host; the port may be 0.
func parseAddr(s string) (Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return Addr{}, fmt.Errorf("%w: %q", ErrBadAddr, s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return Addr{}, fmt.Errorf("%w: %q: port %q", ErrBadAddr, s, port)
	}
	return Addr{Host: canonHost(host), Port: int(p)}, nil
}

// hostOf takes a host, or the host of a "host:port", in canonical form: the fault
// methods accept both, so that a test may pass the addresses it has at hand.
func hostOf(s string) string {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return canonHost(s)
}

func canonHost(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// Cut blocks both directions between hosts a and b (see the package doc for what a
// blocked link does) until Heal(a, b) or HealAll.
func (n *Network) Cut(a, b string) {
	n.update(func() { n.cutLocked(hostOf(a), hostOf(b)) })
}

// Heal unblocks both directions between hosts a and b: it undoes Cut, Partition and
// Isolate for this pair, and Holds either way. Held bytes are then delivered in order.
func (n *Network) Heal(a, b string) {
	a, b = hostOf(a), hostOf(b)
	n.update(func() {
		for _, l := range []link{{a, b}, {b, a}} {
			delete(n.cuts, l)
			delete(n.holds, l)
			delete(n.drops, l)
		}
	})
}

// HealAll unblocks every link: no cut, hold or packet drop remains. Delays stay.
func (n *Network) HealAll() {
	n.update(func() {
		clear(n.cuts)
		clear(n.holds)
		clear(n.drops)
	})
}

// Partition cuts every pair of hosts that are in different groups. Links within a
// group, and cuts set before, are left as they are.
func (n *Network) Partition(groups ...[]string) {
	n.update(func() {
		for i, g := range groups {
			for _, h := range groups[i+1:] {
				for _, a := range g {
					for _, b := range h {
						n.cutLocked(hostOf(a), hostOf(b))
					}
				}
			}
		}
	})
}

// Isolate cuts host a from every other host the network knows now: those that have
// listened, dialled (Dialer) or bound a transport. Heal(a, b) reconnects one of them.
func (n *Network) Isolate(a string) {
	a = hostOf(a)
	n.update(func() {
		for h := range n.hosts {
			n.cutLocked(a, h)
		}
	})
}

// Hold blocks one direction, from host from to host to, until Release(from, to) (or
// Heal, HealAll): its packets are dropped and its stream bytes held, while the other
// direction flows. New dials between the two hang, as their SYN-ACK or SYN is lost.
func (n *Network) Hold(from, to string) {
	from, to = hostOf(from), hostOf(to)
	n.update(func() {
		if from != to {
			n.holds[link{from, to}] = true
		}
	})
}

// Release undoes Hold(from, to) and DropPackets(from, to). A cut between the two
// still blocks.
func (n *Network) Release(from, to string) {
	from, to = hostOf(from), hostOf(to)
	n.update(func() {
		delete(n.holds, link{from, to})
		delete(n.drops, link{from, to})
	})
}

// DropPackets drops every packet from host from to host to (gossip's UDP side, as a
// full receive buffer or a lossy link does) until Release(from, to) (or Heal,
// HealAll); streams between them flow.
func (n *Network) DropPackets(from, to string) {
	from, to = hostOf(from), hostOf(to)
	n.update(func() {
		if from != to {
			n.drops[link{from, to}] = true
		}
	})
}

// Delay makes bytes and packets from host from to host to arrive d late; 0 (or a
// negative d) clears it. Bytes already written keep the delay they were sent with, and
// a stream's bytes stay in order.
func (n *Network) Delay(from, to string, d time.Duration) {
	from, to = hostOf(from), hostOf(to)
	n.update(func() {
		if d > 0 && from != to {
			n.delays[link{from, to}] = d
		} else {
			delete(n.delays, link{from, to})
		}
	})
}

// Reset closes every open stream between hosts a and b (either way; within a host
// when a == b): both ends' reads and writes fail with ECONNRESET, and unread bytes are
// lost. New streams are not affected.
func (n *Network) Reset(a, b string) {
	a, b = hostOf(a), hostOf(b)
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.streams {
		if l := s.ab.link; (l == link{a, b}) || (l == link{b, a}) {
			s.reset()
			delete(n.streams, s)
		}
	}
}

func (n *Network) cutLocked(a, b string) {
	if a != b {
		n.cuts[link{a, b}] = true
		n.cuts[link{b, a}] = true
	}
}

// update changes the faults under the lock, then pushes the new state into every open
// stream and wakes hanging dials.
func (n *Network) update(change func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	change()
	for s := range n.streams {
		for _, p := range []*pipe{s.ab, s.ba} {
			p.setLink(n.blockedLocked(p.link), n.delays[p.link])
		}
	}
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *Network) blockedLocked(l link) bool { return n.cuts[l] || n.holds[l] }

// freePortLocked finds a port on host that no listener or transport uses.
func (n *Network) freePortLocked(host string) (int, bool) {
	for range 65535 {
		p := n.nextPort
		n.nextPort++
		if n.nextPort > 65535 {
			n.nextPort = 1
		}
		if n.listeners[Addr{host, p}.String()] == nil {
			return p, true
		}
	}
	return 0, false
}

// bindLocked reserves addr (choosing a free port for port 0) for a listener.
func (n *Network) bindLocked(addr Addr, ln *listener) (Addr, error) {
	if addr.Port == 0 {
		p, ok := n.freePortLocked(addr.Host)
		if !ok {
			return addr, errAddrInUse(addr)
		}
		addr.Port = p
	}
	key := addr.String()
	if n.listeners[key] != nil {
		return addr, errAddrInUse(addr)
	}
	n.listeners[key] = ln
	n.hosts[addr.Host] = true
	return addr, nil
}

// ephemeralLocked returns the local address of a stream dialled from host.
func (n *Network) ephemeralLocked(host string) Addr {
	p := n.nextEphem
	n.nextEphem++
	if n.nextEphem > 65535 {
		n.nextEphem = firstEphemPort
	}
	return Addr{host, p}
}

func (n *Network) forget(s *stream) {
	n.mu.Lock()
	delete(n.streams, s)
	n.mu.Unlock()
}
