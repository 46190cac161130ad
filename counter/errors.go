package counter

import "errors"

// Errors an operation can end in. Every error a Decider or a parser returns wraps one of
// these, so front ends map them to status codes with errors.Is; the wrapping message
// adds the detail (which field, what value).
//
// Bad input (HTTP 400, RESP -ERR):
var (
	ErrEmptyKey    = errors.New("key is empty")
	ErrKeyTooLong  = errors.New("key is too long")
	ErrBadWindow   = errors.New("invalid window")
	ErrBadBuckets  = errors.New("invalid buckets")
	ErrBadN        = errors.New("invalid n")
	ErrBadLimit    = errors.New("invalid limit")
	ErrUnknownOp   = errors.New("unknown op")
	ErrBadArgument = errors.New("invalid argument")
)

// Failures of the service rather than of the input (HTTP 503, RESP -ERR):
var (
	// ErrUnavailable: the counter's owner, and any fallback, cannot decide the op now.
	ErrUnavailable = errors.New("counter unavailable")
	// ErrShuttingDown: the node is stopping and takes no new operations.
	ErrShuttingDown = errors.New("node is shutting down")
	// ErrOutcomeUnknown: the op was sent to its owner and no answer came back (a timeout,
	// a lost connection): it may or may not have been applied. It is never applied
	// again by another node, so retrying it is the client's choice.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrFull: the op would create a counter, and its owner holds its most counters
	// (--max-counters) or window shapes (--max-shapes), none idle past its window to
	// reclaim. Nothing was applied; counters already held keep working, and new ones
	// are admitted again as old ones leave their window.
	ErrFull = errors.New("counter table full")
)

// Answers between nodes, never seen by clients (the router routes the op again):
var (
	// ErrNotOwner: the node asked does not decide the counter now (it is not the owner
	// in its ring, or does not hold the lease yet). The op was certainly not applied.
	ErrNotOwner = errors.New("not the counter's owner")
	// ErrExpired: the owner read the op after its sender had given up on it (its time
	// budget ran out on the way, or while it waited there), so it did not decide it. The
	// op was certainly not applied.
	ErrExpired = errors.New("request arrived after its deadline")
	// ErrNotSent: the op was never sent to its owner (the peer could not be reached, is
	// marked down, or its queue was full). It was certainly not applied, and may be
	// routed again.
	ErrNotSent = errors.New("not sent to the owner")
)

var badInput = []error{ErrEmptyKey, ErrKeyTooLong, ErrBadWindow, ErrBadBuckets, ErrBadN,
	ErrBadLimit, ErrUnknownOp, ErrBadArgument}

// IsBadInput reports whether err is the caller's fault (HTTP 400) rather than the
// service's (HTTP 503).
func IsBadInput(err error) bool {
	for _, e := range badInput {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
