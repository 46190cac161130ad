package certfiles

import (
	"crypto/tls"
	"sync/atomic"
)

// ServerConfig is the TLS configuration of a port that presents the Source's
// certificate: TLS 1.2 and up, the protocols of nextProtos offered by ALPN, and, when
// the Source has a CA bundle, a client certificate required that chains to it. Each
// handshake takes the pair in use at its start (GetConfigForClient), so a reload
// applies to new connections and leaves open ones alone.
func (s *Source) ServerConfig(nextProtos []string) *tls.Config {
	var cached atomic.Pointer[pairConfig]
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			p := s.Current()
			if c := cached.Load(); c != nil && c.pair == p {
				return c.conf, nil
			}
			c := &pairConfig{pair: p, conf: pairServerConfig(p, nextProtos)}
			cached.Store(c)
			return c.conf, nil
		},
	}
}

// pairConfig is the configuration built for one pair, kept until the pair changes so
// that a handshake does not build one.
type pairConfig struct {
	pair *Pair
	conf *tls.Config
}

func pairServerConfig(p *Pair, nextProtos []string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos, Certificates: []tls.Certificate{*p.Cert}}
	if p.CAs != nil {
		c.ClientCAs, c.ClientAuth = p.CAs, tls.RequireAndVerifyClientCert
	}
	return c
}
