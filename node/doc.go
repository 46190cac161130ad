// Package node wires one leapcount node together; it is the one place that knows every
// other package, and cmd/node only turns flags into a Config and handles signals. A
// Node holds:
//
//   - the counter store (leaparray.Store, sized by --max-counters: memory.go) and, with
//     --redis, the Redis store behind it (fallback: redis.go, redismetrics.go);
//   - the op path: the partition owner (owner.Owner) under the cluster router
//     (route.Router), which every front end holds as its counter.Decider (see package
//     counter for the path of one op);
//   - the front ends: HTTP (httpapi, with the status page /ui: status.go, ui.html, and
//     /debug/pprof: pprof.go), RESP (respapi, and its Redis Cluster view:
//     rediscluster.go) and gRPC, Envoy's rate limit service (rlsapi: grpc.go);
//   - the cluster plane: gossip membership and the ring (cluster, ring: membership.go,
//     cluster.go, disagree.go), partition leases (lease), the node-to-node rpc client
//     and server (rpc, carrying counter's ops, owner's Handoffs and lease's heartbeats
//     through internal/peerrpc's adapters; dialed from the node's own address: dial.go)
//     and their authentication (peerauth: security.go);
//   - metrics of all of these (metrics.go, opsmetrics.go, forwardmetrics.go,
//     handoffmetrics.go) and the runtime's GC tuning and pauses (gcgoal.go, gcpause.go);
//   - the background loops: membership, the owner's flushes and releases, the sweep of
//     idle counters; Close stops them in order, client requests first (node.go).
package node
