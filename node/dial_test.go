package node

import (
	"context"
	"net"
	"testing"
)

func TestRPCDialsFromItsBindAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct{ rpc, want string }{{"127.0.0.4:7947", "127.0.0.4"}, {"0.0.0.0:7947", "127.0.0.1"}} {
		dial := sourceDialer(tc.rpc)
		if dial == nil {
			dial = func(ctx context.Context, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
		}
		c, err := dial(context.Background(), ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.RemoteAddr().(*net.TCPAddr).IP.String(); got != tc.want {
			t.Errorf("--rpc %s: call came from %s; want %s", tc.rpc, got, tc.want)
		}
		c.Close()
		s.Close()
	}
}
