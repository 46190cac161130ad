package node

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strings"

	"github.com/leapcount/leapcount/peerauth"
)

// maxPeerConns caps the connections the rpc port keeps open: peers hold one each (two
// while redialing), so this is far above any cluster's need and far below what would
// hurt the node.
const maxPeerConns = 1024

// ParseGossipKeys reads --gossip-key: base64 keys of 16, 24 or 32 bytes, separated by
// commas or white space (a key file may hold one per line). The first encrypts.
func ParseGossipKeys(s string) ([][]byte, error) {
	var keys [][]byte
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
		k, err := base64.StdEncoding.DecodeString(f)
		if err != nil {
			return nil, &ConfigError{"gossip-key", fmt.Sprintf("key %d is not base64: %v", len(keys)+1, err)}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// validateSecurity checks the cluster-plane flags.
func (c *Config) validateSecurity() error {
	for i, k := range c.GossipKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return &ConfigError{"gossip-key", fmt.Sprintf("key %d is %d bytes: want 16, 24 or 32 (for example: head -c 32 /dev/urandom | base64)", i+1, n)}
		}
	}
	files := []struct{ flag, v string }{{"tls-cert", c.TLSCertFile}, {"tls-key", c.TLSKeyFile}, {"tls-ca", c.TLSCAFile}}
	given := 0
	for _, f := range files {
		if f.v != "" {
			given++
		}
	}
	if given != 0 && given != len(files) {
		for _, f := range files {
			if f.v == "" {
				return &ConfigError{f.flag, "--tls-cert, --tls-key and --tls-ca go together"}
			}
		}
	}
	if n := len(c.clusterLabel()); n > 255 {
		// (The label adds the partition count to the name, when it is not the default.)
		return &ConfigError{"cluster-name", fmt.Sprintf("%d bytes with the partition count: at most 255", n)}
	}
	return nil
}

// peerAuth builds the rpc handshake from the flags; bad certificate files are named.
func (c *Config) peerAuth() (*peerauth.Auth, error) {
	a, err := peerauth.New(peerauth.Config{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile,
		Keys: c.GossipKeys, Cluster: c.clusterLabel(), Logger: c.Logger.With("component", "rpc")})
	if err != nil {
		return nil, &ConfigError{"tls-cert", err.Error()}
	}
	return a, nil
}

// authenticatedDial wraps the rpc client's dial with the handshake: a peer that fails
// it was never sent anything, which the rpc client reports as unreachable.
func authenticatedDial(dial func(ctx context.Context, addr string) (net.Conn, error), auth *peerauth.Auth) func(ctx context.Context, addr string) (net.Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		return auth.Client(ctx, nc)
	}
}

// warnIfOpen warns, loudly, when a cluster port that other hosts may reach takes
// anyone: without a key, anyone who reaches the gossip port joins the cluster, and
// anyone who reaches the rpc port counts, hands counters over and renews leases.
func (n *Node) warnIfOpen(mode peerauth.Mode) {
	exposed := func(addr string) bool {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return true
		}
		if host == "localhost" {
			return false
		}
		ip := net.ParseIP(host)
		return ip == nil || !ip.IsLoopback()
	}
	if len(n.cfg.GossipKeys) == 0 && exposed(n.cfg.GossipAddr) {
		n.cfg.Logger.Warn("SECURITY: gossip is neither encrypted nor authenticated: anyone who reaches "+
			n.cfg.GossipAddr+" can join the cluster and take over counters; set --gossip-key (see docs/security.md)",
			"gossip", n.cfg.GossipAddr)
	}
	if mode == peerauth.ModeNone && exposed(n.cfg.RPCAddr) {
		n.cfg.Logger.Warn("SECURITY: the rpc port is open: anyone who reaches "+n.cfg.RPCAddr+
			" can count, hand counters over and renew leases; set --gossip-key or --tls-cert/--tls-key/--tls-ca (see docs/security.md)",
			"rpc", n.cfg.RPCAddr)
	}
}
