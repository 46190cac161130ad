// Package loadgen is the load generator of the benchmark harness (tools/cmd/bench): one
// client for every side of a comparison (redis-server and leapcount, RESP and HTTP),
// so that a ratio between two sides measures the servers, not two clients.
//
// Run opens N connections to one address and keeps P requests in flight on each
// (P = 1: unpipelined), every request built by a Request function from a key that a
// Keys stream draws (uniform over a key space, a small hot set, never-seen keys, or a
// fixed range once each). A timed run warms up, then measures a window: operations
// completed in it, errors, a latency histogram of every operation (from the write of
// its batch to the read of its reply) and the generator's own CPU time; hooks let the
// caller read the servers' CPU at the window's edges. A counted run sends an exact
// number of requests (loading counters for a memory measurement).
//
// The generator is cheap because it shares the machine's cores with the servers it
// measures: a connection reuses its buffers, parses replies in place, draws keys from
// its own random source and records latencies in its own histogram, so an operation
// allocates nothing.
package loadgen
