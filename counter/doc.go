// Package counter defines what a counter is and the operations on it, as the external
// contract (CONTRACT.md) states them: identity (key, window, buckets), the four
// operations, the bounds on every field, and the errors for input outside them.
//
// Every front end turns requests into Ops and hands a Batch of them to a Decider. HTTP
// and RESP check each op as they parse it, with Limits.Check (which stamps the key's
// hash slot); gRPC (package rlsapi) makes its ops from its rules and leaves them
// unchecked, and the router checks them (Limits.Ready, which also checks the ops a peer
// forwards and passes a checked op in one comparison). Every layer of a node's op path
// is a Decider with the one method Decide: the cluster router (package route) sends
// each op to its owner, the owner (package owner) decides the ops of the partitions it
// holds, and Local decides them against the in-memory store (package leaparray).
//
// # The path of one op
//
// A local SW.INCR (one this node owns, its counter in memory) crosses four package
// boundaries, respapi → route → owner → counter → leaparray, in these functions:
//
//  1. respapi/loop.go: loopConn.traffic and serve; session.receive and serve
//     (respapi/session.go) frame the whole commands the event loop read.
//  2. respapi/dispatch.go: Server.execute parses the command (parseOp, respapi/parse.go,
//     with Limits.Check) and adds the op to the connection's batch.
//  3. respapi/dispatch.go: Server.decide, at the end of what was read, hands the batch
//     to the node's Decider (loopConn.startBatch, respapi/loop.go).
//  4. route/router.go: Router.Decide (client ops refused while the node joins or
//     stops); allLocal finds this node the owner of every op's slot; decideLocal
//     (route/local.go).
//  5. owner/decide.go: Owner.Decide; decideAtOnce (owner/atonce.go) finds each op's
//     partition decidable here (judge) and calls decideHere.
//  6. counter/local.go: Local.DecideNow, then leaparray.Store.TryIncr.
//  7. route/local.go: localCall.finish applies the fail policy (route/policy.go).
//  8. respapi/dispatch.go: Server.answer writes the replies (writeResult), which
//     loopConn.serve writes to the socket in one write.
//
// An op owned elsewhere takes steps 1-4 on the node it entered, where Router.Decide
// finds one other owner (oneRemote) and forwardAll (route/forward.go) hands the batch
// to the rpc client without waiting (internal/peerrpc's Forwarder, rpc.Client.Go; ops
// and results encoded by this package's Wire). On the owner, rpc.Server's reader calls
// Router.HandleAsync (route/handle.go, through peerrpc), which checks the ops (they
// arrive unchecked off the wire) and starts Owner.Decide: steps 5 and 6. The answer reaches
// forwardCall.answered (route/forward.go) on the entry node's rpc reader, and the
// batch's Done (loopConn.batchDecided) brings it back to the event loop: steps 7 and 8.
// An op that cannot be decided at once (its counter loads from Redis, its partition
// waits for a lease) goes the same way: Owner.Decide's start (owner/decide.go) parks
// it, and the batch's Done is called once it is decided.
//
// docs/architecture.md walks these paths, HTTP's and gRPC's ShouldRateLimit too, step
// by step, with the goroutine each step runs on.
package counter
