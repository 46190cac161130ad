package node

import (
	"context"
	"net"
)

// sourceDialer returns the rpc client's dial for a node whose --rpc binds one IP: it
// dials peers from that IP, so that they (and firewalls) see its calls come from the
// address it serves on, as its gossip does. nil (the rpc package's plain dial) when
// --rpc binds every address or a name.
func sourceDialer(rpcAddr string) func(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(rpcAddr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || ip.IsUnspecified() {
		return nil
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{}
		if h, _, err := net.SplitHostPort(addr); err == nil {
			// A loopback source reaches only loopback peers, and the other way round.
			if to := net.ParseIP(h); to != nil && to.IsLoopback() == ip.IsLoopback() {
				d.LocalAddr = &net.TCPAddr{IP: ip}
			}
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}
