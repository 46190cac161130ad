package cluster

import (
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// sourceBound is memberlist's own UDP/TCP transport whose TCP dials leave from the
// bind IP. Without it a member bound to one address of a host (say 10.0.0.5, or
// 127.0.0.3 in tests) would dial its peers from whatever address the kernel picks
// (127.0.0.1 for a loopback peer), so peers, firewalls and tests would see gossip
// streams coming from an address the member does not gossip from. UDP packets already
// leave from the bound socket.
type sourceBound struct {
	*memberlist.NetTransport
	local *net.TCPAddr
}

// bindTransport returns memberlist's transport bound to ip:port, dialing from ip
// (port 0: a free port, which it reports).
func bindTransport(ip string, port int, mc *memberlist.Config) (*sourceBound, int, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{ip}, BindPort: port, Logger: mc.Logger})
	if err != nil {
		return nil, 0, err
	}
	if port == 0 {
		port = nt.GetAutoBindPort()
	}
	return &sourceBound{NetTransport: nt, local: &net.TCPAddr{IP: net.ParseIP(ip)}}, port, nil
}

// DialTimeout implements memberlist.Transport.
func (t *sourceBound) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *sourceBound) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: t.local}
	return d.Dial("tcp", a.Addr)
}

// specificIP reports whether ip names one address (not 0.0.0.0 or ::).
func specificIP(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && !p.IsUnspecified()
}
