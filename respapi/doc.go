// Package respapi serves the RESP (Redis protocol) part of the external contract
// (CONTRACT.md), so that redis-cli, redis-benchmark and any Redis client library can
// talk to a node.
//
// The counter commands are SW.INCR, SW.COUNT, SW.ALLOW and SW.RESET; each is parsed
// into a counter.Op, checked with counter.Limits.Check, and decided by a counter.Decider.
// Around them the server answers the handful of connection commands clients send on
// their own (PING, ECHO, QUIT, HELLO, AUTH, SELECT, COMMAND, INFO, CONFIG GET, CLIENT
// SETNAME/SETINFO) the way Redis 7 does, speaking protocol version 2 only.
//
// # Pipelining
//
// The counter commands a client has pipelined, and that have already been read, go to
// the Decider in one call, and their replies go back in order. A cluster router can
// then send one request per owner for a whole pipeline instead of one per command.
// Any other command in the pipeline ends the batch: the batch is decided and answered
// first, so replies and connection state (AUTH) keep the client's order.
//
// # Serving
//
// Connections that are sockets are served by event loops (loop.go): one per P,
// each polling its connections and serving what arrived, a pipeline read in one read
// and answered in one write. A loop never waits: it hands a batch to the Decider, which
// decides it at once when it can, and a batch decided later (forwarded to another node,
// loaded from Redis, waiting for a lease) parks its connection until its Done brings
// the answer back to the loop; a forwarded batch waits on no goroutine at all. Other
// connections (in-process ones, in tests) get a goroutine each (stream.go), which
// waits for its batches (counter.Do).
//
// # Hostile clients
//
// A framing guard (guard.go) runs over the bytes as they arrive, so only whole
// commands are parsed, once each: a bad multibulk count, bulk length, header or inline
// line gets "-ERR Protocol error: ..." and the connection is closed, as does a client
// that leaves more than MaxUnanswered bytes unanswered (framer). The deadlines are
// kept: IdleTimeout for a silent client, AuthTimeout for one that has not
// authenticated, WriteTimeout for one that does not read its replies (on the loops, a
// sweeper checks them every few milliseconds). MaxClients caps the connections
// (internal/connlimit), and wrong AUTH guesses are limited per source address
// (internal/authlimit). The metrics count what was dropped and why
// (leapcount_resp_connections_dropped_total) and what was refused
// (leapcount_resp_connections_refused_total).
package respapi
