package rpc

import (
	"errors"

	"github.com/leapcount/leapcount/internal/wire"
)

// Errors of the protocol. What a call's error says about its outcome is in the package
// documentation ("Errors and outcomes"). Errors of the ops themselves are their codec's
// (counter's sentinels, in a node), carried in each result.
var (
	// ErrPeerUnreachable: the request was never sent (the peer could not be dialed, is
	// marked down, or the call ended while still queued): it is safe to send it
	// elsewhere.
	ErrPeerUnreachable = errors.New("rpc: peer unreachable")
	// ErrConnectionLost: the connection failed after the request was sent; the peer may
	// or may not have decided it. Sending it elsewhere could count it twice.
	ErrConnectionLost = errors.New("rpc: connection to peer lost")
	// ErrTimeout: the call's deadline passed after the request was sent; the peer may
	// have decided it (its answer was late).
	ErrTimeout = errors.New("rpc: peer did not answer in time")
	// ErrClosed: the client or server was closed, or the peer forgotten.
	ErrClosed = errors.New("rpc: closed")
	// ErrBadFrame: a frame could not be decoded; the connection is dropped. It is
	// wire.ErrMalformed, which the codecs of the messages carried report.
	ErrBadFrame = wire.ErrMalformed
	// ErrTooLarge: a message's frame would exceed its kind's size bound; it was not
	// sent.
	ErrTooLarge = errors.New("rpc: message too large")
)
