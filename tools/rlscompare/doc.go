// Package rlscompare holds the side-by-side test of leapcount's rate limit service
// against envoyproxy/ratelimit itself (built from its source, with its Redis): the
// same config and the same request stream get the same answers with fixed windows.
// The test runs only with the build tag ratelimitcompare and
// LEAPCOUNT_RATELIMIT_BIN naming envoyproxy/ratelimit's service binary (make
// compare-ratelimit builds it from a checkout named by RATELIMIT_SRC).
package rlscompare
