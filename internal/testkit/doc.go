// Package testkit holds, in its sub-packages, what tests share and production never
// runs: real redis-servers on free ports (testredis), node processes and their faults
// (proctest, faultload, history: the Jepsen-style checker), an in-process network
// (netsim), certificates, clocks, frames, ports and waits. Everything under internal/
// outside testkit is production code.
package testkit
