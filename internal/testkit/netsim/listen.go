package netsim

import (
	"context"
	"net"
	"sync"
	"syscall"
	"time"
)

// backlog is how many dialled streams wait for Accept; a dial beyond it is refused.
const backlog = 256

// listener accepts streams dialled to its address.
type listener struct {
	n         *Network
	addr      Addr
	conns     chan net.Conn // dialled, not yet accepted; memberlist reads it as StreamCh
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

var _ net.Listener = (*listener)(nil)

// Listen listens for streams on addr, "host:port"; port 0 picks a free port, which
// Addr reports. It fails with EADDRINUSE when a listener or transport has the address.
func (n *Network) Listen(addr string) (net.Listener, error) {
	a, err := parseAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "netsim", Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listenLocked(a)
}

func (n *Network) listenLocked(a Addr) (*listener, error) {
	ln := &listener{n: n, conns: make(chan net.Conn, backlog), done: make(chan struct{})}
	a, err := n.bindLocked(a, ln)
	if err != nil {
		return nil, err
	}
	ln.addr = a
	return ln, nil
}

// Accept waits for a dialled stream, or for Close (then it returns net.ErrClosed).
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "netsim", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close frees the address and resets the streams dialled but not accepted.
func (l *listener) Close() error {
	first := false
	l.closeOnce.Do(func() {
		first = true
		l.n.mu.Lock()
		// Dials deliver into conns under the network lock, and find the listener
		// through the map: once it is out of the map, nothing more arrives, so the
		// drain below leaves no stream behind.
		if l.n.listeners[l.addr.String()] == l {
			delete(l.n.listeners, l.addr.String())
		}
		l.n.mu.Unlock()
		close(l.done)
		for {
			select {
			case c := <-l.conns:
				s := c.(*conn).s
				s.reset()
				l.n.forget(s)
			default:
				return
			}
		}
	})
	if !first {
		return &net.OpError{Op: "close", Net: "netsim", Addr: l.addr, Err: net.ErrClosed}
	}
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }

// Dialer returns a dial function for streams from host fromHost (a host, or a
// "host:port" whose port is ignored), shaped like net.Dialer.DialContext without the
// network argument. A dial fails at once with ECONNREFUSED when nothing listens at
// addr; it waits one round trip of the links' delays; it hangs while either direction
// between the hosts is blocked, until the link heals or ctx ends (then it fails with
// ErrTimeout, or ctx's error when ctx was cancelled).
func (n *Network) Dialer(fromHost string) func(ctx context.Context, addr string) (net.Conn, error) {
	from := hostOf(fromHost)
	n.mu.Lock()
	n.hosts[from] = true
	n.mu.Unlock()
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return n.dial(ctx, from, addr)
	}
}

func (n *Network) dial(ctx context.Context, from, addr string) (net.Conn, error) {
	to, err := parseAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "netsim", Err: err}
	}
	if to.Port == 0 {
		return nil, dialError(to, syscall.ECONNREFUSED)
	}
	n.mu.Lock()
	rtt := n.delays[link{from, to.Host}] + n.delays[link{to.Host, from}]
	n.mu.Unlock()
	if err := sleepCtx(ctx, rtt); err != nil {
		return nil, dialError(to, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, dialError(to, ctxError(err))
		}
		n.mu.Lock()
		if n.blockedLocked(link{from, to.Host}) || n.blockedLocked(link{to.Host, from}) {
			changed := n.changed
			n.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		c, err := n.connectLocked(from, to)
		n.mu.Unlock()
		if err != nil {
			return nil, dialError(to, err)
		}
		return c, nil
	}
}

// connectLocked hands the accepting end of a new stream to the listener at to.
func (n *Network) connectLocked(from string, to Addr) (net.Conn, error) {
	ln := n.listeners[to.String()]
	if ln == nil {
		return nil, syscall.ECONNREFUSED
	}
	c, peer := n.newStreamLocked(n.ephemeralLocked(from), to)
	select {
	case ln.conns <- peer:
		return c, nil
	default: // the backlog is full
		delete(n.streams, c.s)
		return nil, syscall.ECONNREFUSED
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxError(ctx.Err())
	}
}

// ctxError turns an expired context into ErrTimeout, as the net package does.
func ctxError(err error) error {
	if err == context.DeadlineExceeded {
		return ErrTimeout
	}
	return err
}

func dialError(to Addr, err error) error {
	return &net.OpError{Op: "dial", Net: "netsim", Addr: to, Err: err}
}

func errAddrInUse(a Addr) error {
	return &net.OpError{Op: "listen", Net: "netsim", Addr: a, Err: syscall.EADDRINUSE}
}
