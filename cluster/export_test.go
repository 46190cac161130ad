package cluster

// InitialJoinDone exposes, to the external tests, when the first join is over.
func InitialJoinDone(c *Cluster) <-chan struct{} { return c.initialDone }

// JoinFailures exposes how many join calls no seed answered.
func JoinFailures(c *Cluster) uint64 { return c.joinFails.Load() }
