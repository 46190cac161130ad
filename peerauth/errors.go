package peerauth

import "errors"

// Errors of a handshake. Each wraps one of these, with the detail.
var (
	// ErrRefused: the peer is not a member: wrong key, wrong cluster name, no or a
	// foreign certificate, or it refused us.
	ErrRefused = errors.New("peer refused")
	// ErrHandshake: the handshake did not complete (I/O error, timeout, garbage).
	ErrHandshake = errors.New("peer handshake failed")
)
