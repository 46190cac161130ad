package cluster

import (
	"context"
	"net"
	"time"

	"github.com/leapcount/leapcount/internal/backoff"
)

// lookupTimeout bounds one resolution of the seed names, so that a DNS server that
// does not answer delays a join attempt by this much at most.
const lookupTimeout = 5 * time.Second

// joinLoop joins the seeds with backoff until one answers (or the attempts run out),
// then, every rejoin interval until stopped, joins again the seeds it does not see and
// the members it saw die: memberlist does not look for a dead member again, so without
// this the two sides of a healed network partition would each stay alone.
//
// Seed names are resolved again at every attempt, initial or periodic: a headless
// Service name lists the pods that exist now, so members that appear later (a
// StatefulSet scaled up, a pod rescheduled to a new IP) are found at the next re-join.
func (c *Cluster) joinLoop(seeds []string, retry Backoff, rejoin time.Duration) {
	defer c.joinDone.Done()
	if len(seeds) > 0 || c.registry != nil {
		c.initialJoin(seeds, retry)
	}
	close(c.initialDone)
	if rejoin < 0 {
		return
	}
	c.every(rejoin, func() {
		addrs, _ := c.seedAddrs(seeds)
		if missing := union(c.absent(addrs), c.deadAddrs()); len(missing) > 0 {
			c.join(missing)
		}
	})
}

// every runs f every interval until the join loop stops.
func (c *Cluster) every(interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.joinCtx.Done():
			return
		case <-tick.C:
			f()
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

// initialJoin tries, with backoff, until a seed answers. A seed name that does not
// resolve yet is no error: its pods may not exist yet, so it is logged and tried again.
// When every seed resolves and names only this member (a StatefulSet's first pod, the
// only address of its headless Service), there is nobody to join: this member is the
// first, as if it had no seeds.
func (c *Cluster) initialJoin(seeds []string, retry Backoff) {
	policy := backoff.Policy{Initial: retry.Initial, Max: retry.Max}
	wait := policy.Next(0)
	for attempt := 1; ; attempt++ {
		addrs, resolved := c.seedAddrs(seeds)
		if len(addrs) == 0 && resolved {
			c.log.Info("the seeds name only this member: it is the first", "seeds", seeds)
			c.tab.markJoined()
			return
		}
		if len(addrs) > 0 && c.join(addrs) {
			return
		}
		if retry.Attempts > 0 && attempt >= retry.Attempts {
			c.log.Warn("no seed answered; will retry at the rejoin interval", "attempts", attempt, "seeds", seeds)
			return
		}
		select {
		case <-c.joinCtx.Done():
			return
		case <-time.After(wait):
		}
		wait = policy.Next(wait)
	}
}

// seedAddrs resolves the seeds afresh, and lists this member in the registry, and
// returns the gossip addresses of the members they name, this one left out. resolved
// is false when some seed gave no address or the registry did not answer; that is
// logged, and the addresses of the others are still returned.
func (c *Cluster) seedAddrs(seeds []string) (addrs []string, resolved bool) {
	ctx, cancel := context.WithTimeout(c.joinCtx, lookupTimeout)
	defer cancel()
	all, err := resolveSeeds(ctx, c.lookup, seeds, c.port)
	if err != nil {
		c.joinFails.Add(1)
		c.log.Info("a seed gave no address yet; will try it again", "err", err)
	}
	listed, lerr := c.listed(ctx)
	if lerr != nil {
		c.joinFails.Add(1)
		c.log.Info("the registry of members did not answer; will try it again", "err", lerr)
	}
	all = union(all, listed)
	addrs, resolved = c.otherSeeds(preferFamily(all, c.localAddr)), err == nil && lerr == nil
	c.seeds.Store(&seedResolution{addrs: addrs, resolved: resolved})
	return addrs, resolved
}

// seedResolution is what the seeds named at their last resolution.
type seedResolution struct {
	addrs    []string // gossip addresses, this member's left out
	resolved bool     // every seed gave an address
}

// SeesEverySeed reports whether every seed resolved, at the last attempt, and each
// address it gave is a member this node sees alive (or the seeds were only this member):
// a node that founds a cluster must see every member that may hold one already.
func (c *Cluster) SeesEverySeed() bool {
	r := c.seeds.Load()
	return r != nil && r.resolved && len(c.absent(r.addrs)) == 0
}

// join asks memberlist to exchange state with every address given (each one in turn,
// within TCPTimeout); it reports whether any answered.
func (c *Cluster) join(addrs []string) bool {
	n, err := c.ml.Join(addrs)
	if n == 0 {
		c.joinFails.Add(1)
		c.log.Debug("join failed", "seeds", addrs, "err", err)
		return false
	}
	c.log.Debug("joined", "seeds", addrs, "answered", n)
	return true
}

// otherSeeds drops the addresses that are this member itself, so that a seed list
// shared by every node (or a name that lists every pod) does not make a node "join"
// itself.
func (c *Cluster) otherSeeds(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if a != c.localAddr && a != c.bindAddr {
			out = append(out, a)
		}
	}
	return out
}

// absent returns the addresses that are not the gossip address of a member this node
// sees alive: a re-join is needed only to reach members it lost or never met.
func (c *Cluster) absent(addrs []string) []string {
	present := make(map[string]bool)
	for _, m := range c.tab.list(nil) {
		if m.State == StateAlive || m.State == StateLeaving {
			present[m.Addr] = true
		}
	}
	var out []string
	for _, a := range addrs {
		if !present[a] {
			out = append(out, a)
		}
	}
	return out
}

// union is a followed by the elements of b not in a.
func union(a, b []string) []string {
	seen := make(map[string]bool, len(a))
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			seen[s] = true
			a = append(a, s)
		}
	}
	return a
}

// defaultLookup resolves names with the system's resolver (/etc/hosts, then DNS).
func defaultLookup(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}
