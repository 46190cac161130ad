// Package rpc is the node-to-node protocol: a node sends operations on counters it does
// not own to their owner, and the owner answers.
//
// # Batching and pipelining
//
// A Client keeps one persistent TCP connection per peer. Concurrent callers hand their
// ops to the peer's writer goroutine, which packs whatever is queued into one frame (a
// batch closes when it holds MaxBatchOps ops, or when the queue is empty after waiting
// at most Linger for more), writes it and goes on without waiting for the answer: many
// frames are in flight on one connection, matched to their callers by id. Under load
// each write and each syscall carries many ops; at low load a lone op goes out at once.
//
// # At most one hop
//
// Every request carries the sender's ring epoch and a hop mark. A Handler deciding a
// forwarded request answers ErrNotOwner for ops whose counter it does not own instead
// of forwarding them again, so two nodes whose views of the ring differ can never bounce
// a request between them; the sender decides what to do (retry once with a newer view,
// or fall back).
//
// # Wire format
//
// Hand-written binary, length-prefixed frames of varints (codec.go), because it is the
// hot path of every forwarded op: BenchmarkCodec measures it against encoding/gob on
// the same batch. A frame is
//
//	u32 length (big-endian, of what follows) | u8 type | uvarint id | body
//
// A request body is u8 flags (bit 0: forwarded) | uvarint epoch | uvarint count | ops,
// each op u8 kind | uvarint key length | key | uvarint window ms | uvarint buckets |
// uvarint n | uvarint limit. A response body is uvarint count | results, each u8 code
// and, for code OK, uvarint count | u8 allowed | uvarint remaining | varint retry |
// u8 existed; for an error code, uvarint length | message.
//
// Every call has a deadline (the caller's context, bounded by Config.Timeout). A
// connection that fails fails every call in flight on it at once, and the next call
// dials again.
package rpc
