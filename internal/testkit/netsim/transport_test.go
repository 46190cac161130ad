package netsim

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// The tests' hosts are loopback addresses: were a transport ever bypassed, gossip
// would stay on this machine.
const (
	host1 = "127.0.10.1"
	host2 = "127.0.10.2"
)

func newTransport(t *testing.T, n *Network, addr string) memberlist.NodeAwareTransport {
	t.Helper()
	tr, err := n.Transport(addr)
	if err != nil {
		t.Fatalf("transport %s: %v", addr, err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

func advertised(t *testing.T, tr memberlist.Transport) string {
	t.Helper()
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil {
		t.Fatalf("advertise address: %v", err)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(port))
}

func send(t *testing.T, tr memberlist.Transport, to, msg string) {
	t.Helper()
	if _, err := tr.WriteTo([]byte(msg), to); err != nil {
		t.Fatalf("send %q to %s: %v", msg, to, err)
	}
}

// receive waits up to within for a packet; nil if none came.
func receive(tr memberlist.Transport, within time.Duration) *memberlist.Packet {
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(within):
		return nil
	}
}

func TestTransportPackets(t *testing.T) {
	noLeaks(t)
	n := New()
	t1, t2 := newTransport(t, n, host1+":0"), newTransport(t, n, host2+":7946")
	a1, a2 := advertised(t, t1), advertised(t, t2)
	send(t, t1, a2, "hello")
	p := receive(t2, long)
	if p == nil || string(p.Buf) != "hello" || p.From.String() != a1 {
		t.Fatalf("got packet %+v; want hello from %s", p, a1)
	}

	n.Cut(host1, host2)
	send(t, t1, a2, "lost")
	if p := receive(t2, quiet); p != nil {
		t.Fatalf("packet %q crossed a cut", p.Buf)
	}
	n.Heal(host1, host2)
	n.Hold(host2, host1)
	send(t, t2, a1, "held")
	send(t, t1, a2, "flows")
	if p := receive(t1, quiet); p != nil {
		t.Fatalf("packet %q crossed a hold", p.Buf)
	}
	if p := receive(t2, long); p == nil || string(p.Buf) != "flows" {
		t.Fatalf("got %+v; want the packet of the open direction", p)
	}
	n.Release(host2, host1)

	const d = 100 * time.Millisecond
	n.Delay(host1, host2, d)
	sent := time.Now()
	send(t, t1, a2, "late")
	if p := receive(t2, long); p == nil || p.Timestamp.Sub(sent) < d {
		t.Fatalf("delayed packet %+v arrived before %v", p, d)
	}
	send(t, t1, a2, "in flight")
	n.Cut(host1, host2) // a packet on the wire when the link is cut is lost
	if p := receive(t2, 3*d); p != nil {
		t.Fatalf("packet %q in flight crossed a cut", p.Buf)
	}
}

// openStream dials from's stream to to and returns both ends, closed when the test
// ends.
func openStream(t *testing.T, from, to memberlist.NodeAwareTransport) (dialed, accepted net.Conn) {
	t.Helper()
	c, err := from.DialTimeout(advertised(t, to), long)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case s := <-to.StreamCh():
		t.Cleanup(func() { s.Close() })
		return c, s
	case <-time.After(long):
		t.Fatalf("no stream arrived")
	}
	return nil, nil
}

// DropPackets loses one direction's packets; the other direction's, and streams
// both ways, flow; Release ends it.
func TestDropPackets(t *testing.T) {
	noLeaks(t)
	n := New()
	t1, t2 := newTransport(t, n, host1+":0"), newTransport(t, n, host2+":0")
	a1, a2 := advertised(t, t1), advertised(t, t2)
	n.DropPackets(host1, host2)
	send(t, t1, a2, "dropped")
	send(t, t2, a1, "flows")
	if p := receive(t2, quiet); p != nil {
		t.Fatalf("packet %q crossed a drop", p.Buf)
	}
	if p := receive(t1, long); p == nil || string(p.Buf) != "flows" {
		t.Fatalf("got %+v; want the packet of the other direction", p)
	}
	c, s := openStream(t, t1, t2)
	write(t, c, "stream")
	readString(t, s, "stream")
	n.Release(host1, host2)
	send(t, t1, a2, "again")
	if p := receive(t2, long); p == nil || string(p.Buf) != "again" {
		t.Fatalf("got %+v after Release; want the packet", p)
	}
}

func TestTransportStreams(t *testing.T) {
	noLeaks(t)
	n := New()
	t1, t2 := newTransport(t, n, host1+":0"), newTransport(t, n, host2+":0")
	c, s := openStream(t, t2, t1)
	write(t, c, "push")
	readString(t, s, "push")
	if got := s.RemoteAddr().(Addr).Host; got != host2 {
		t.Fatalf("stream from host %s; want %s", got, host2)
	}

	n.Isolate(host1)
	start := time.Now()
	if _, err := t2.DialTimeout(advertised(t, t1), quiet); !isTimeout(err) {
		t.Fatalf("dial into an isolated host: got %v; want a timeout", err)
	}
	if elapsed := time.Since(start); elapsed < quiet {
		t.Fatalf("dial failed after %v; want it to wait its timeout %v", elapsed, quiet)
	}
}

func TestTransportAddresses(t *testing.T) {
	noLeaks(t)
	n := New()
	tr := newTransport(t, n, host1+":0")
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil || ip.String() != host1 || port == 0 || ip.To4() == nil || len(ip) != net.IPv4len {
		t.Fatalf("advertise: got %v %d %v; want %s (4 bytes) and the bound port", ip, port, err, host1)
	}
	if ip2, port2, _ := tr.FinalAdvertiseAddr("127.0.10.9", 0); ip2.String() != "127.0.10.9" || port2 != port {
		t.Errorf("advertise with an IP and port 0: got %v %d; want 127.0.10.9 %d", ip2, port2, port)
	}
	if _, port3, _ := tr.FinalAdvertiseAddr("127.0.10.9", 99); port3 != 99 {
		t.Errorf("advertise with a port: got %d; want 99", port3)
	}
	if _, _, err := tr.FinalAdvertiseAddr("name", 0); err == nil {
		t.Errorf("advertise a name: got no error; want one")
	}
	bound := advertised(t, tr)
	if _, err := n.Transport(bound); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second transport on %s: got %v; want EADDRINUSE", bound, err)
	}
	if _, err := n.Listen(bound); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("listen on a transport's address: got %v; want EADDRINUSE", err)
	}
	if _, err := n.Transport("node-1:7946"); !errors.Is(err, ErrBadAddr) {
		t.Errorf("transport on a host name: got %v; want ErrBadAddr", err)
	}
	tr.Shutdown()
	tr.Shutdown() // idempotent
	if _, err := tr.WriteTo([]byte("x"), bound); !errors.Is(err, net.ErrClosed) {
		t.Errorf("send after Shutdown: got %v; want net.ErrClosed", err)
	}
	newTransport(t, n, bound) // the address is free again
}

// Two memberlists on the network find each other, and shutting them down leaves no
// goroutine in netsim (noLeaks).
func TestMemberlistOverNetwork(t *testing.T) {
	noLeaks(t)
	n := New()
	var mls []*memberlist.Memberlist
	for i, host := range []string{host1, host2} {
		conf := memberlist.DefaultLocalConfig()
		conf.Name = fmt.Sprintf("m%d", i)
		conf.Transport = newTransport(t, n, host+":7946")
		conf.Logger = log.New(io.Discard, "", 0)
		ml, err := memberlist.Create(conf)
		if err != nil {
			t.Fatalf("create %s: %v", conf.Name, err)
		}
		t.Cleanup(func() { ml.Shutdown() })
		mls = append(mls, ml)
	}
	if _, err := mls[1].Join([]string{host1 + ":7946"}); err != nil {
		t.Fatalf("join: %v", err)
	}
	wait.For(t, long, func() error {
		for _, ml := range mls {
			if got := ml.NumMembers(); got != 2 {
				return fmt.Errorf("%s sees %d members; want 2", ml.LocalNode().Name, got)
			}
		}
		return nil
	})
}
