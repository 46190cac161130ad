package lease

import "sync/atomic"

// Stats are a Keeper's running totals, for an operator's metrics.
type Stats struct {
	Granted          uint64 // partition grants given to peers' heartbeats (renewals included)
	HeartbeatsFailed uint64 // heartbeats sent that got no reply in time
	Lapsed           uint64 // claimed partitions whose lease ran out while held
}

// stats are the counters behind Stats; atomics, since heartbeats are answered and
// sent on many goroutines.
type stats struct {
	granted, failed, lapsed atomic.Uint64
}

// Stats returns the Keeper's totals so far.
func (k *Keeper) Stats() Stats {
	return Stats{Granted: k.stats.granted.Load(), HeartbeatsFailed: k.stats.failed.Load(), Lapsed: k.stats.lapsed.Load()}
}
