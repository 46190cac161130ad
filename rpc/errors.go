package rpc

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leapcount/leapcount/counter"
)

// Errors of the protocol. Results decoded from a peer wrap the counter package's
// sentinel errors where one fits, so errors.Is works across the hop. What a call's
// error says about its outcome is in the package documentation ("Errors and outcomes").
var (
	// ErrNotOwner: the peer does not decide the counter now (its ring differs, or it
	// holds no lease for it yet); certainly not applied. It is counter.ErrNotOwner, so
	// owners answer it without knowing this package.
	ErrNotOwner = counter.ErrNotOwner
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
	// ErrBadFrame: a frame could not be decoded; the connection is dropped.
	ErrBadFrame = errors.New("rpc: malformed frame")
	// ErrExpired: the request's time ran out on the owner (its budget, counted from
	// when the owner read it) before the owner decided it; it was not decided.
	ErrExpired = errors.New("rpc: request arrived after its deadline")

	// ErrHandoffRefused: the receiver did not take the handoff.
	ErrHandoffRefused = errors.New("rpc: handoff refused")
	// ErrHandoffNotOwner: the receiver refused the handoff because it does not own its
	// partitions: send it to the node that does. A HandoffHandler returns it (wrapped or
	// not) and the sender gets it back. It wraps ErrHandoffRefused.
	ErrHandoffNotOwner = fmt.Errorf("%w: receiver does not own the partitions", ErrHandoffRefused)
	// ErrHandoffOtherRun: the receiver is a later run of the node than the one the
	// handoff names (Handoff.ToRun): it did not apply it, and whether the earlier run
	// did is gone with that run. It wraps ErrHandoffRefused.
	ErrHandoffOtherRun = fmt.Errorf("%w: meant for an earlier run of the receiver", ErrHandoffRefused)
	// ErrHandoffTooLarge: the handoff's frame would exceed MaxHandoffBytes; it was not
	// sent. Cut it into smaller chunks (HandoffSize).
	ErrHandoffTooLarge = errors.New("rpc: handoff too large")
	// ErrNoLeaseReply: the peer answered a heartbeat without a reply: it has no lease
	// handler, or its reply did not fit the wire's bounds.
	ErrNoLeaseReply = errors.New("rpc: peer gave no heartbeat reply")
)

// Result codes on the wire.
const (
	codeOK uint8 = iota
	codeBadInput
	codeNotOwner
	codeUnavailable
	codeShuttingDown
	codeExpired
	codeFull // a node that does not know it reads it as codeUnavailable
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
	case errors.Is(err, counter.ErrFull):
		return codeFull
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
	case codeFull: // the message already says it, once is enough
		return fmt.Errorf("%w: %s", counter.ErrFull, strings.TrimPrefix(msg, counter.ErrFull.Error()+": "))
	}
	return fmt.Errorf("%w: %s", counter.ErrUnavailable, msg)
}
