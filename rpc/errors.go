package rpc

import (
	"errors"
	"fmt"

	"github.com/leapcount/leapcount/counter"
)

// Errors of the protocol. Results decoded from a peer wrap the counter package's
// sentinel errors where one fits, so errors.Is works across the hop.
var (
	// ErrNotOwner: the peer does not own the counter (its view of the ring differs).
	ErrNotOwner = errors.New("rpc: peer does not own the counter")
	// ErrPeerUnreachable: the peer could not be dialed (or was marked down after a
	// failed dial), so the request was never sent: it is safe to send it elsewhere.
	ErrPeerUnreachable = errors.New("rpc: peer unreachable")
	// ErrConnectionLost: the connection failed after the request was sent; the peer may
	// or may not have decided it. Sending it elsewhere could count it twice.
	ErrConnectionLost = errors.New("rpc: connection to peer lost")
	// ErrTimeout: the peer did not answer before the deadline (it may have decided the
	// request).
	ErrTimeout = errors.New("rpc: peer did not answer in time")
	// ErrClosed: the client or server was closed.
	ErrClosed = errors.New("rpc: closed")
	// ErrBadFrame: a frame could not be decoded; the connection is dropped.
	ErrBadFrame = errors.New("rpc: malformed frame")
	// ErrExpired: the owner read the request after its deadline and did not decide it.
	ErrExpired = errors.New("rpc: request arrived after its deadline")
)

// Result codes on the wire.
const (
	codeOK uint8 = iota
	codeBadInput
	codeNotOwner
	codeUnavailable
	codeShuttingDown
	codeExpired
)

func errCode(err error) uint8 {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, ErrNotOwner):
		return codeNotOwner
	case errors.Is(err, ErrExpired):
		return codeExpired
	case errors.Is(err, counter.ErrShuttingDown):
		return codeShuttingDown
	case counter.IsBadInput(err):
		return codeBadInput
	}
	return codeUnavailable
}

// codeErr rebuilds an error from the wire, wrapping the matching sentinel.
func codeErr(code uint8, msg string) error {
	switch code {
	case codeOK:
		return nil
	case codeNotOwner:
		return fmt.Errorf("%w: %s", ErrNotOwner, msg)
	case codeExpired:
		return fmt.Errorf("%w: %w: %s", counter.ErrUnavailable, ErrExpired, msg)
	case codeShuttingDown:
		return fmt.Errorf("%w: %s", counter.ErrShuttingDown, msg)
	case codeBadInput:
		return fmt.Errorf("%w: %s", counter.ErrBadArgument, msg)
	}
	return fmt.Errorf("%w: %s", counter.ErrUnavailable, msg)
}
