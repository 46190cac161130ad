// Package rlscompare holds the side-by-side test of leapcount's rate limit service
// against envoyproxy/ratelimit itself (built from its source, with its Redis): both
// started from one set of envoyproxy/ratelimit's environment variables (ours as
// `leapcount-node ratelimit`), once with one runtime directory and once with one xDS
// server (go-control-plane's, internal/testkit/xdstest), get the same request stream
// and give the same answers with fixed windows. The test runs only with the build tag
// ratelimitcompare, LEAPCOUNT_RATELIMIT_BIN naming envoyproxy/ratelimit's service
// binary and LEAPCOUNT_NODE_BIN leapcount-node (make compare-ratelimit builds both).
package rlscompare
