// Package counter defines what a counter is and the operations on it, as the external
// contract (CONTRACT.md) states them: identity (key, window, buckets), the four
// operations, the bounds on every field, and the errors for input outside them.
//
// Every front end (HTTP, RESP, node-to-node RPC) parses requests into an Op, checks it
// with Validate, and hands a slice of ops to a Doer, which decides them: Local decides
// against the in-memory store of this node; the cluster router (a higher layer) sends
// each op to its owner.
package counter
