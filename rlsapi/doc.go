// Package rlsapi serves Envoy's rate limit service (envoy.service.ratelimit.v3,
// ShouldRateLimit) over gRPC, as envoyproxy/ratelimit answers it, from the rules of
// package limits and the counters of a counter.Decider: each descriptor's rule counts in
// a counter of its own (CounterKey), its hits added first and the count compared with
// the limit after, so a denied request counts too, as there. A descriptor that matches
// no rule is OK with no limit; an unlimited one is OK and counts nothing. An answer
// that could not be decided is gRPC UNAVAILABLE (Envoy then applies its
// failure_mode_deny), never a made-up OK.
//
// The server also answers grpc.health.v1 and server reflection, checks a bearer token
// in the "authorization" metadata, and caps message sizes, streams and descriptors.
package rlsapi
