package peerauth

import (
	"errors"
	"fmt"
)

// Errors of a handshake. Each wraps one of these, with the detail.
var (
	// ErrRefused: the peer is not a member: wrong key, wrong cluster name, no or a
	// foreign certificate, or it refused us.
	ErrRefused = errors.New("peer refused")
	// ErrHandshake: the handshake did not complete (I/O error, timeout, garbage).
	ErrHandshake = errors.New("peer handshake failed")
)

// ProtocolVersion is the cluster protocol version this node speaks: that of everything
// nodes say to each other (package rpc's frames and the heartbeats and handoffs they
// carry, this handshake past its version, the gossip metadata). Any change to one of
// them is a new version. Two nodes of different versions refuse each other here, on
// every connection, whichever dials: the nodes of a cluster must all speak one (docs/operations.md,
// Upgrades). It travels as one byte, '0' plus it: at most 207.
const ProtocolVersion uint8 = 1

// VersionError is the refusal of a peer that speaks another cluster protocol version
// (Theirs; this node speaks Ours). It wraps ErrRefused.
type VersionError struct {
	Peer         string // the peer's address
	Theirs, Ours uint8
}

func (e *VersionError) Error() string { return fmt.Sprintf("%v: %s: %s", ErrRefused, e.Peer, e.why()) }

func (e *VersionError) Unwrap() error { return ErrRefused }

// why is the refusal's reason, as this node says it.
func (e *VersionError) why() string {
	return fmt.Sprintf("cluster protocol version %d, this node speaks %d", e.Theirs, e.Ours)
}
