package netsim

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
)

const (
	// packetQueue is how many packets wait for memberlist to read them; more are
	// dropped, as a full UDP receive buffer drops them.
	packetQueue = 1024
	// maxPacket is the largest packet, as for UDP.
	maxPacket = 65507
)

// transport is a memberlist transport on the network: packets for memberlist's UDP
// side, streams for its TCP side, one address for both.
type transport struct {
	n        *Network
	ln       *listener // streams to addr; memberlist reads ln.conns as StreamCh
	addr     Addr
	ip       net.IP
	packets  chan *memberlist.Packet
	closed   atomic.Bool
	shutOnce sync.Once
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// Transport binds a memberlist transport to bindAddr, "ip:port" (memberlist advertises
// IPs, so the host must be an IP literal); port 0 picks a free port. Set it as
// memberlist.Config.Transport. Its packets and streams go through the network and
// obey its faults; its Shutdown frees the address and resets unaccepted streams.
// FinalAdvertiseAddr returns the configured advertise IP when there is one (with the
// bound port when the configured port is 0), else the bound address.
func (n *Network) Transport(bindAddr string) (memberlist.NodeAwareTransport, error) {
	a, err := parseAddr(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("netsim: transport: %w", err)
	}
	ip := net.ParseIP(a.Host)
	if ip == nil {
		return nil, fmt.Errorf("netsim: transport: %w: %q: the host must be an IP", ErrBadAddr, bindAddr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ln, err := n.listenLocked(a)
	if err != nil {
		return nil, err
	}
	t := &transport{n: n, ln: ln, addr: ln.addr, ip: ip, packets: make(chan *memberlist.Packet, packetQueue)}
	n.packets[t.addr.String()] = t
	return t, nil
}

func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	adv := t.ip
	if ip != "" {
		if adv = net.ParseIP(ip); adv == nil {
			return nil, 0, fmt.Errorf("netsim: transport: advertise address %q is not an IP", ip)
		}
	}
	if port == 0 || ip == "" {
		port = t.addr.Port
	}
	if ip4 := adv.To4(); ip4 != nil {
		adv = ip4
	}
	return adv, port, nil
}

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends a packet. Like a UDP send it succeeds whether or not anything
// receives the packet.
func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	to, err := parseAddr(a.Addr)
	switch {
	case err != nil:
		return time.Time{}, t.opError("write", nil, err)
	case t.closed.Load():
		return time.Time{}, t.opError("write", to, net.ErrClosed)
	case len(b) > maxPacket:
		return time.Time{}, t.opError("write", to, syscall.EMSGSIZE)
	}
	t.n.sendPacket(t.addr, to, append([]byte(nil), b...))
	return time.Now(), nil
}

func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout dials as Dialer does, giving up after timeout (memberlist always
// passes its TCPTimeout; 0 fails at once rather than waiting forever).
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.closed.Load() {
		return nil, t.opError("dial", nil, net.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.n.dial(ctx, t.addr.Host, a.Addr)
}

func (t *transport) StreamCh() <-chan net.Conn { return t.ln.conns }

// Shutdown stops packets and streams to this transport's address and frees it. It is
// safe to call more than once.
func (t *transport) Shutdown() error {
	t.shutOnce.Do(func() {
		t.closed.Store(true)
		t.n.mu.Lock()
		if t.n.packets[t.addr.String()] == t {
			delete(t.n.packets, t.addr.String())
		}
		t.n.mu.Unlock()
		_ = t.ln.Close()
	})
	return nil
}

func (t *transport) opError(op string, to net.Addr, err error) error {
	if to == nil {
		return &net.OpError{Op: op, Net: "netsim", Source: t.addr, Err: err}
	}
	return &net.OpError{Op: op, Net: "netsim", Source: t.addr, Addr: to, Err: err}
}

// sendPacket delivers a packet now, or after the link's delay; a blocked link, or
// one that drops packets, at either time, drops it.
func (n *Network) sendPacket(from, to Addr, buf []byte) {
	l := link{from.Host, to.Host}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blockedLocked(l) || n.drops[l] {
		return
	}
	d := n.delays[l]
	if d <= 0 {
		n.deliverLocked(from, to, buf)
		return
	}
	time.AfterFunc(d, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.blockedLocked(l) && !n.drops[l] {
			n.deliverLocked(from, to, buf)
		}
	})
}

// deliverLocked queues a packet for whichever transport has the address now, without
// waiting: a full queue drops it.
func (n *Network) deliverLocked(from, to Addr, buf []byte) {
	dst := n.packets[to.String()]
	if dst == nil {
		return
	}
	select {
	case dst.packets <- &memberlist.Packet{Buf: buf, From: from, Timestamp: time.Now()}:
	default:
	}
}
