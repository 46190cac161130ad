package lease

import "sync/atomic"

// Stats are a Keeper's running totals, for an operator's metrics.
type Stats struct {
	Granted          uint64 // partition grants given to peers' heartbeats (renewals included)
	HeartbeatsFailed uint64 // heartbeats sent that got no reply in time
	Lapsed           uint64 // claimed partitions whose lease ran out while held
	HeartbeatsSent   uint64 // heartbeats sent (to the voters, or to every member while it knows none that answer)
	HeartbeatsHeard  uint64 // peers' heartbeats answered (a voter answers every member's)
}

// stats are the counters behind Stats; atomics, since heartbeats are answered and
// sent on many goroutines.
type stats struct {
	granted, failed, lapsed, sent, heard atomic.Uint64
}

// Stats returns the Keeper's totals so far.
func (k *Keeper) Stats() Stats {
	return Stats{Granted: k.stats.granted.Load(), HeartbeatsFailed: k.stats.failed.Load(), Lapsed: k.stats.lapsed.Load(),
		HeartbeatsSent: k.stats.sent.Load(), HeartbeatsHeard: k.stats.heard.Load()}
}
