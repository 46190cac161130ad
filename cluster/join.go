package cluster

import (
	"time"

	"github.com/leapcount/leapcount/internal/backoff"
)

// joinLoop joins the seeds with backoff until one answers (or the attempts run out),
// then, every rejoin interval until stopped, joins again the seeds it does not see and
// the members it saw die: memberlist does not look for a dead member again, so without
// this the two sides of a healed network partition would each stay alone.
func (c *Cluster) joinLoop(seeds []string, retry Backoff, rejoin time.Duration) {
	defer c.joinDone.Done()
	if len(seeds) > 0 {
		c.initialJoin(seeds, retry)
	}
	close(c.initialDone)
	if rejoin < 0 {
		return
	}
	tick := time.NewTicker(rejoin)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			if missing := append(c.absentSeeds(seeds), c.deadAddrs()...); len(missing) > 0 {
				c.join(missing)
			}
		}
	}
}

// deadAddrs are the gossip addresses of members that died (not left) and are still
// listed.
func (c *Cluster) deadAddrs() []string {
	var out []string
	for _, m := range c.tab.list(nil) {
		if m.State == StateDead && m.Name != c.name {
			out = append(out, m.Addr)
		}
	}
	return out
}

func (c *Cluster) initialJoin(seeds []string, retry Backoff) {
	policy := backoff.Policy{Initial: retry.Initial, Max: retry.Max}
	wait := policy.Next(0)
	for attempt := 1; ; attempt++ {
		if c.join(seeds) {
			return
		}
		if retry.Attempts > 0 && attempt >= retry.Attempts {
			c.log.Warn("no seed answered; will retry at the rejoin interval", "attempts", attempt, "seeds", seeds)
			return
		}
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		wait = policy.Next(wait)
	}
}

// join asks memberlist to exchange state with the seeds; it reports whether any
// answered. memberlist contacts them one after another, each within TCPTimeout.
func (c *Cluster) join(seeds []string) bool {
	n, err := c.ml.Join(seeds)
	if n == 0 {
		c.joinFails.Add(1)
		c.log.Debug("join failed", "seeds", seeds, "err", err)
		return false
	}
	c.log.Debug("joined", "seeds", seeds, "answered", n)
	return true
}

// otherSeeds drops the seeds that are this member itself, so that a seed list shared
// by every node does not make a node "join" itself.
func (c *Cluster) otherSeeds(seeds []string, bindAddr string) []string {
	var out []string
	for _, s := range seeds {
		if s != c.localAddr && s != bindAddr {
			out = append(out, s)
		}
	}
	return out
}

// absentSeeds returns the seeds that are not the gossip address of a member this
// node sees alive: a re-join is needed only to reach members it lost. Seeds given
// by host name never match and are always re-joined, which is harmless.
func (c *Cluster) absentSeeds(seeds []string) []string {
	present := make(map[string]bool)
	for _, m := range c.tab.list(nil) {
		if m.State == StateAlive || m.State == StateLeaving {
			present[m.Addr] = true
		}
	}
	var out []string
	for _, s := range seeds {
		if !present[s] {
			out = append(out, s)
		}
	}
	return out
}
