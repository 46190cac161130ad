// Package h2grpc serves gRPC unary calls over HTTP/2 (cleartext, h2c with prior
// knowledge, as gRPC clients and Envoy speak it) with a connection loop of its own,
// and hands every other call to another http.Handler (Config.Others), grpc.Server's ServeHTTP:
// streaming calls, health, reflection, and unary calls it has no handler for.
//
// Why a loop of its own: for a small unary call grpc-go's server spends more CPU in
// its own machinery than the call's handler does (a goroutine, a chain of contexts and
// a stream object per call, a writer goroutine woken per frame; see BENCHMARKS.md).
// Here one goroutine per connection reads and parses frames, and runs an AsyncHandler
// itself (it never waits: a call decided elsewhere is answered when its handler
// replies, from the goroutine that brought the answer) or starts a UnaryHandler on a
// goroutine of its own; the answers of calls that end together leave in one write.
// The answers the reader queues it writes itself before it reads again, as much as
// the socket takes without waiting (writer.flush): the writer's goroutine, woken only
// for the rest and for answers from elsewhere, would cost a thread's wake-up a batch.
//
// What it keeps of the protocol: HTTP/2 flow control both ways (a response waits for
// the peer's window; the peer gets its windows back as requests are consumed, and one
// that sends past them is cut off: inflow.go), SETTINGS,
// PING, RST_STREAM, GOAWAY (a graceful stop lets the calls in flight end), header
// lists bounded in size, streams bounded in number (REFUSED_STREAM past the cap),
// messages bounded in size (RESOURCE_EXHAUSTED, as soon as a message's length prefix
// says it is over), grpc-timeout as the handler's deadline, a request that does not
// arrive whole within Config.RequestTimeout answered DEADLINE_EXCEEDED (stall.go), and
// a connection that sends nothing in time (a preface wrong at its first byte at once),
// or does not read what it is sent, is closed, and one that floods frames that carry
// no call, or resets its calls as it opens them, is sent GOAWAY ENHANCE_YOUR_CALM and
// closed (calm.go). Response headers are encoded without the HPACK dynamic table, so
// answers need no encoder state and can be built by any goroutine.
//
// The package moves bytes: a handler gets the request message serialized and returns
// its answer serialized; it knows no service's types.
package h2grpc
