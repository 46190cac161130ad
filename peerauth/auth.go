package peerauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// Config is what New needs; every field may be empty.
type Config struct {
	// CertFile, KeyFile and CAFile (PEM) turn mutual TLS on: all three or none.
	CertFile, KeyFile, CAFile string
	// Keys are the cluster's keys (16, 24 or 32 bytes each): a node proves it holds
	// Keys[0], and accepts a proof by any of them, so a key can be rotated in steps
	// (see README, Security).
	Keys [][]byte
	// Cluster is the cluster's name: a peer that gives another is refused.
	Cluster string
	// Timeout bounds a whole handshake (default 5s).
	Timeout time.Duration
}

// DefaultTimeout is Config.Timeout when it is zero.
const DefaultTimeout = 5 * time.Second

// Mode names what authenticates a peer.
type Mode string

// The modes; see the package documentation.
const (
	ModeCertificates Mode = "certificates"
	ModeKey          Mode = "key"
	ModeNone         Mode = "none"
)

// Auth runs handshakes, on either end of a connection. It is safe for concurrent use.
type Auth struct {
	cfg    Config
	mode   Mode
	server *tls.Config // nil in ModeNone
	client *tls.Config
}

// New checks cfg and prepares the TLS configurations: it reads the certificate files,
// or makes the throwaway certificate of ModeKey.
func New(cfg Config) (*Auth, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if len(cfg.Cluster) > maxName {
		return nil, fmt.Errorf("peerauth: cluster name of %d bytes: at most %d", len(cfg.Cluster), maxName)
	}
	for i, k := range cfg.Keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("peerauth: key %d is %d bytes: want 16, 24 or 32", i+1, n)
		}
	}
	a := &Auth{cfg: cfg, mode: ModeNone}
	files := cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != ""
	var err error
	switch {
	case files:
		a.mode = ModeCertificates
		a.server, a.client, err = certificateConfigs(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	case len(cfg.Keys) > 0:
		a.mode = ModeKey
		a.server, a.client, err = throwawayConfigs()
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Mode tells what authenticates peers.
func (a *Auth) Mode() Mode { return a.mode }

// Client runs the dialing end's handshake on nc and returns the connection to use.
// On error nc is closed.
func (a *Auth) Client(ctx context.Context, nc net.Conn) (net.Conn, error) {
	return a.handshake(ctx, nc, true)
}

// Server runs the accepting end's handshake on nc and returns the connection to use.
// On error nc is closed.
func (a *Auth) Server(nc net.Conn) (net.Conn, error) {
	return a.handshake(context.Background(), nc, false)
}

func (a *Auth) handshake(ctx context.Context, nc net.Conn, dialer bool) (net.Conn, error) {
	deadline := time.Now().Add(a.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	c, err := a.secure(ctx, nc, dialer)
	if err == nil {
		err = a.introduce(c, dialer)
	}
	if err != nil {
		nc.Close()
		if !errors.Is(err, ErrRefused) {
			err = fmt.Errorf("%w with %s: %w", ErrHandshake, nc.RemoteAddr(), err)
		}
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// secure runs the TLS handshake, if the mode has one.
func (a *Auth) secure(ctx context.Context, nc net.Conn, dialer bool) (net.Conn, error) {
	if a.mode == ModeNone {
		return nc, nil
	}
	var tc *tls.Conn
	if dialer {
		tc = tls.Client(nc, a.client)
	} else {
		tc = tls.Server(nc, a.server)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) || errors.Is(err, errForeignCertificate) {
			return nil, fmt.Errorf("%w: %s: %w", ErrRefused, nc.RemoteAddr(), err)
		}
		return nil, err
	}
	return tc, nil
}
