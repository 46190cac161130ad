// Package rpc is the node-to-node transport: a node sends operations on counters it
// does not own to their owner, and the owner answers. Messages of other kinds (in a
// node: handoffs, counters moving between owners, and lease heartbeats) travel on the
// same connections, each on a frame of its own.
//
// It moves bytes and owns no domain type. A Client and a Server carry ops of a type O,
// answered with results of a type R, encoded by a Codec their user gives (in a node,
// counter's Op and Result, and counter.Wire); a message is bytes in its own package's
// encoding, sent with Client.Send and answered by the MessageHandler of its Kind.
// Package internal/peerrpc joins the two in a node, and translates ErrPeerUnreachable
// into counter.ErrNotSent, so that no routing decision depends on this package's
// errors.
//
// # Batching and pipelining
//
// A Client keeps one persistent connection per peer. Concurrent callers hand their
// ops to the peer's writer goroutine, which packs whatever is queued into one frame,
// writes it and goes on without waiting for the answer: many frames are in flight on
// one connection, matched to their callers by id. A frame closes when it holds
// MaxBatchOps ops, or when the queue is empty even after the writer let every goroutine
// ready to run go first (callers on their way to queue, as grpc-go's writer does before
// it flushes); but while InFlight op frames already wait for their answers, it first
// waits for more ops, up to Linger or until one of those answers comes. Under load each write and each syscall carries many ops; at low
// load a lone op goes out at once. Do waits for its call's answer; Go does not, and
// hands the outcome to a callback (an event loop's way: no goroutine waits per call).
//
// # At most one hop
//
// Every request carries the sender's ring epoch and a hop mark. A Handler deciding a
// forwarded request answers ErrNotOwner for ops whose counter it does not own instead
// of forwarding them again, so two nodes whose views of the ring differ can never bounce
// a request between them; the sender decides what to do (retry once with a newer view,
// or fall back).
//
// # Deadlines and giving up
//
// Every call has a deadline: the caller's context's, bounded by Config.Timeout. An op
// frame carries a budget, the time left until its calls' earliest deadline when it is
// written, and the owner does not decide the frame once the budget has run out,
// counted from when it read the frame (ErrExpired): by then a caller has given up.
// Each node measures the budget on its own monotonic clock, so the nodes' wall clocks
// need not agree. A frame held up on its way (or by an owner frozen with it in its
// socket) may be decided after its caller gave up; that caller was told the outcome
// is unknown (ErrTimeout, or its context's error), which forbids deciding the ops
// elsewhere. A caller whose context ends gives up its own call only: its answer, if
// one comes, is dropped, and the connection and the other calls on it go on. A call
// given up while still queued is never sent. A connection that fails fails every call
// in flight on it at once, and the next call dials again.
//
// # Errors and outcomes
//
// What a call's error says about whether the peer decided it:
//
//   - ErrPeerUnreachable: never sent (the peer could not be dialed, is marked down, its
//     queue was full when Go was called, or the call ended while still queued). Safe
//     to send elsewhere.
//   - ErrTimeout, ErrConnectionLost, or the caller's context error (Canceled) after
//     the call was sent: outcome unknown. The owner may have decided it (its answer was
//     late, or lost); sending it elsewhere could count it twice.
//   - ErrClosed: the client was closed, or the peer forgotten; unknown if it was sent.
//   - nil: the peer answered; per-op errors are in the results, as the codec carries
//     them (in a node, counter.ErrNotOwner and counter.ErrExpired there say the op was
//     certainly not decided; an op the server did not decide because its budget ran
//     out is answered with the codec's Expired result).
//
// # Wire format
//
// Hand-written binary, length-prefixed frames of varints (codec.go), because it is the
// hot path of every forwarded op: BenchmarkCodec measures it against encoding/gob on
// the same batch. A frame is
//
//	u32 length (big-endian, of what follows; at most MaxFrameBytes) | u8 type | uvarint id | body
//
// A frame's body is read as it arrives (a length alone costs nothing), and a frame that
// stops arriving midway for 30s costs its connection; between frames a connection may
// stay idle as long as it likes. A malformed frame of any type drops the connection.
//
// Type 1, ops: u8 flags (bit 0: forwarded; any other bit set is malformed) | uvarint
// epoch | uvarint budget | uvarint count | ops, each in the codec's encoding. The budget
// is in whole milliseconds (0: none left), measured from when the owner reads the frame
// on its own monotonic clock. Type 2 answers it: uvarint count | results, each in the
// codec's encoding (counter.Wire documents a node's ops and results).
//
// A message of Kind k is a frame of type k whose body is the message, in its package's
// encoding; its answer is a frame of type k+1 with the answer's body. A node sends
// KindHandoff (3, at most owner.MaxHandoffBytes; package owner's handoffwire.go
// documents its encoding), KindHeartbeat (5; package lease's wire.go), KindHotKeys
// (7; package hotkeys' wire.go) and KindQuotaShare (9; package fairshare's share.go), the
// last two to members that advertise them. A frame of a type no
// handler takes, or over its kind's bound, is malformed.
//
// These formats have one shape each, that of the cluster protocol version
// (peerauth.ProtocolVersion), which changes with any of them: in a node every
// connection begins with peerauth's handshake (SetHandshake, and the client's Dial),
// which refuses a peer of another version, so no frame of another is ever read.
package rpc
