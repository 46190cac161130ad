// Package httpapi serves the HTTP (JSON) part of the external contract (CONTRACT.md):
// the counter operations under /v1/, the cluster view, health and readiness probes,
// and Prometheus metrics.
//
// Each request is parsed into counter.Op values, checked with counter.Limits.Check,
// and decided by one call to a counter.Decider (counter.Do: a handler may wait); a
// /v1/batch request is one call for all its valid ops. The package holds no counter state of its own. A /v1/allow answer
// also carries RateLimit-* and Retry-After headers (ratelimit.go).
//
// Parsing is strict, so that a client's mistake is reported rather than guessed at:
// unknown JSON fields or query parameters, trailing data after the JSON object, and
// fields that do not apply to the operation are all 400. Numbers are read exactly
// (never through float64), so limits up to 2^62 survive.
//
// The bearer token is checked by an Authorizer, within a budget of wrong guesses per
// source address (internal/authlimit) that the node shares with the RESP front end: a
// wrong token from a source over it gets 429 with Retry-After; the right token is
// never refused.
package httpapi
