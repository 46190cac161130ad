// Package tools holds, in its sub-packages, the project's test and benchmark tooling
// that is more than a helper: the whole-cluster simulation (sim), the side-by-side run
// against envoyproxy/ratelimit (rlscompare), and the benchmark harnesses and their
// commands (benchharness, loadgen, rlsbench, cmd/bench, cmd/rlsbench) that write
// BENCHMARKS.md. No production package imports them.
package tools
