// Package route sends each operation to its counter's owner. A Router is the Doer the
// front ends call: ops whose key this node owns are decided here; the rest are grouped
// by owner and forwarded, one batched rpc call per owner, all owners at once. The Router
// is also the owner's side of the protocol (an rpc.Handler): it decides forwarded ops
// it owns and answers rpc.ErrNotOwner for the others, never forwarding a second time.
//
// A forwarded op answered "not owner" means the two nodes' rings differ, which happens
// for a moment while membership changes. If this node's ring has changed since the op
// was sent, the op is routed once more with the new ring; otherwise it fails with
// counter.ErrUnavailable, and the client may retry.
package route
