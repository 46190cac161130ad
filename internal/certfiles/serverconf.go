package certfiles

import (
	"context"
	"crypto/tls"
	"errors"
	"sync/atomic"
	"time"
)

// A Pacer spaces handshakes out: Wait returns once one may begin, or an error when its
// turn would come after ctx's deadline. *rate.Limiter (golang.org/x/time/rate) is one.
type Pacer interface {
	Wait(ctx context.Context) error
}

// ErrHandshakeRate is the error of a handshake whose turn did not come within the wait
// ServerConfig allows: the connection is closed before any costly step.
var ErrHandshakeRate = errors.New("certfiles: TLS handshake rate exceeded")

// ServerConfig is the TLS configuration of a port that presents the Source's
// certificate: TLS 1.2 and up, the protocols of nextProtos offered by ALPN, and, when
// the Source has a CA bundle, a client certificate required that chains to it. Each
// handshake takes the pair in use at its start (GetConfigForClient), so a reload
// applies to new connections and leaves open ones alone.
//
// With pace, each handshake first waits its turn, at most maxWait; one that would wait
// longer fails ErrHandshakeRate. The wait comes after the ClientHello is read and before
// the server's key exchange and signature, the handshake's costly part, so that a flood
// of handshakes costs the node at most pace's rate of them.
func (s *Source) ServerConfig(nextProtos []string, pace Pacer, maxWait time.Duration) *tls.Config {
	var cached atomic.Pointer[pairConfig]
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if pace != nil {
				ctx, cancel := context.WithTimeout(hello.Context(), maxWait)
				err := pace.Wait(ctx)
				cancel()
				if err != nil {
					return nil, ErrHandshakeRate
				}
			}
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
