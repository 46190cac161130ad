// Package proctest runs clusters of real leapcount node processes for fault tests:
// the binary of ./cmd/node, started on 127.0.0.1 with free ports, stopped with real
// signals (SIGTERM, SIGKILL, SIGSTOP and SIGCONT). Package nodetest starts nodes inside
// the test process; this package is for what only separate processes can show: a crash
// that leaves no goroutine behind, a frozen process whose sockets stay open, a restart
// under the same name and ports.
//
// The binary is built once per test binary (Binary) into a temporary directory; a test
// package that wants the directory removed at exit calls Main from its TestMain.
//
// StartCluster starts n nodes, node i named node-i and joining node 0's gossip address,
// each on port 0 everywhere: the node logs its bound addresses in a JSON "node serving"
// line, which the harness reads. Logs go to files in the test's temporary directory and
// their tails are printed when the test fails. Every wait is a poll with a deadline;
// every process still running when the test ends is killed.
package proctest
