// Package route sends each operation to its counter's owner. A Router is the
// counter.Decider the front ends call (router.go): ops whose key this node owns are
// decided here (local.go); the rest are forwarded, one batched rpc call per owner, all
// owners at once (forward.go); allow ops nobody could decide get the fail policy's
// answer (policy.go). While its node joins or stops, it refuses client ops
// (SetAdmission). The Router is also the owner's side of the protocol (HandleAsync,
// handle.go, which node serves over rpc): it decides forwarded ops it owns and answers
// counter.ErrNotOwner for the others, never forwarding a second time. Route knows no
// transport: its Forwarder reports ops never sent as counter.ErrNotSent, and every
// other failure of a call as an unknown outcome.
//
// A forwarded op answered "not owner" means the two nodes' rings differ, which happens
// for a moment while membership changes; an owner that cannot be dialed has usually
// just left. Such ops were certainly not decided, so the router routes them again,
// within RetryWait, as soon as its own ring changes or after a short growing backoff
// (the other node may be the one whose ring is behind). An op whose request was sent
// but not answered (a lost connection, a timeout, the caller giving up) may have been
// decided, so it is never sent again nor decided anywhere else: it fails with
// counter.ErrOutcomeUnknown, and the client decides whether to retry.
package route
