// Package faultload is the correctness load of the fault tests (chaos_test,
// chaos_docker): clients that send a bounded stream of requests to a leapcount cluster
// while it is being broken, record the outcome of every request (ok, failed or unknown),
// and check afterwards that the cluster counted what it acknowledged (the SW.ALLOW
// histories with package history's Jepsen-style checker). It measures nothing: the
// benchmark load generator, which measures throughput, latency and CPU and records no
// outcomes, is tools/loadgen.
//
// A Gen sends SW.INCR key window BY 1 over RESP (go-redis, RESP2, no retries: a retry
// could count twice without the client knowing) through a node picked at random from a
// set the caller can change while it runs, over a fixed set of keys. Per key it counts
// the increments acknowledged (a reply came), failed (an error reply, or the request
// could not be sent) and unknown (sent, no reply: it may or may not have counted). A run
// is bounded in time and in operations and stops by itself; runs can follow each other
// and the tallies add up. An Allows does the same with SW.ALLOW, each request's outcome
// in a history log.
//
// Check asks the cluster, through one node, for every key's count (HTTP /v1/batch, or
// SW.COUNT over RESP) and compares it with what was acknowledged.
package faultload
