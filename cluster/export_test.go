package cluster

import "time"

// InitialJoinDone exposes, to the external tests, when the first join is over.
func InitialJoinDone(c *Cluster) <-chan struct{} { return c.initialDone }

// JoinFailures is c.JoinFailures, as the external tests have called it.
func JoinFailures(c *Cluster) uint64 { return c.JoinFailures() }

// MarkLeavingUnheard marks c leaving as MarkLeaving does when c knows no other member
// yet (its first join under way): the mark is gossiped, but pushed to nobody.
func MarkLeavingUnheard(c *Cluster, timeout time.Duration) error {
	c.del.leaving.Store(true)
	return c.ml.UpdateNode(timeout)
}
