package peerauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/leapcount/leapcount/internal/certfiles"
)

// Config is what New needs; every field may be empty.
type Config struct {
	// CertFile, KeyFile and CAFile (PEM) turn mutual TLS on: all three or none.
	CertFile, KeyFile, CAFile string
	// Keys are the cluster's keys (16, 24 or 32 bytes each): a node proves it holds
	// Keys[0], and accepts a proof by any of them, so a key can be rotated in steps
	// (see docs/security.md).
	Keys [][]byte
	// Cluster is the cluster's name: a peer that gives another is refused.
	Cluster string
	// Timeout bounds a whole handshake (default 5s).
	Timeout time.Duration
	// Logger hears of peers refused for speaking another cluster protocol version, once
	// per peer host (nil: slog.Default()).
	Logger *slog.Logger
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
	cfg     Config
	mode    Mode
	server  *tls.Config // nil in ModeNone
	client  *tls.Config
	files   *certfiles.Source // ModeCertificates' files, watched until Close
	version uint8             // ProtocolVersion; tests play a node of another

	mu     sync.Mutex
	warned map[string]bool // peer hosts logged (warnVersion), at most maxWarned
}

// maxWarned bounds the peers of another version remembered as logged: past it they are
// forgotten, and logged again.
const maxWarned = 1024

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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Auth{cfg: cfg, mode: ModeNone, version: ProtocolVersion}
	files := cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != ""
	var err error
	switch {
	case files:
		a.mode = ModeCertificates
		a.server, a.client, a.files, err = certificateConfigs(cfg.CertFile, cfg.KeyFile, cfg.CAFile, cfg.Logger.With("tls", "cluster"))
	case len(cfg.Keys) > 0:
		a.mode = ModeKey
		a.server, a.client, err = throwawayConfigs()
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Close stops watching the certificate files; handshakes go on with the last ones read.
func (a *Auth) Close() {
	if a.files != nil {
		a.files.Close()
	}
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
		if ve := (*VersionError)(nil); errors.As(err, &ve) {
			a.warnVersion(ve)
		}
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

// warnVersion logs a peer refused for its cluster protocol version, naming both: once
// per peer host (its address without the port, which changes with each connection it
// dials).
func (a *Auth) warnVersion(e *VersionError) {
	host, _, err := net.SplitHostPort(e.Peer)
	if err != nil {
		host = e.Peer
	}
	a.mu.Lock()
	seen := a.warned[host]
	if !seen {
		if a.warned == nil || len(a.warned) >= maxWarned {
			a.warned = map[string]bool{}
		}
		a.warned[host] = true
	}
	a.mu.Unlock()
	if !seen {
		a.cfg.Logger.Warn(fmt.Sprintf("refusing peer %s: cluster protocol version %d, this node speaks %d "+
			"(the nodes of a cluster must all speak one: docs/operations.md, Upgrades)", host, e.Theirs, e.Ours),
			"peer", e.Peer, "peer_protocol_version", e.Theirs, "protocol_version", e.Ours)
	}
}
