package cluster

import (
	"context"
	"time"
)

// A Registry lists the members of a cluster outside it (fallback.Members keeps one in
// Redis). Its listings must lapse when not renewed: a member that crashed stays listed
// only that long, and until then a node that starts takes it for a member that may hold
// the cluster (SeesEverySeed), so it does not found a second one beside it.
type Registry interface {
	// List lists addr, this member's gossip address, and returns the gossip addresses
	// of the other members listed.
	List(ctx context.Context, addr string) ([]string, error)
	// Unlist drops addr: this member leaves.
	Unlist(ctx context.Context, addr string) error
}

// unlistTimeout bounds the Unlist of a member that leaves: a Registry that does not
// answer only leaves the listing to lapse.
const unlistTimeout = 2 * time.Second

// listed lists this member in the registry, if any, and returns the others listed.
func (c *Cluster) listed(ctx context.Context) (addrs []string, err error) {
	if c.registry == nil {
		return nil, nil
	}
	return c.registry.List(ctx, c.localAddr)
}

// listLoop renews this member's listing every interval until the join loop stops. The
// join loop lists it too, at each attempt; this loop keeps it listed while a join waits
// on members that no longer answer, each for up to TCPTimeout, so that the listing
// does not lapse meanwhile.
func (c *Cluster) listLoop(interval time.Duration) {
	defer c.joinDone.Done()
	c.every(interval, func() {
		ctx, cancel := context.WithTimeout(c.joinCtx, lookupTimeout)
		defer cancel()
		if _, err := c.listed(ctx); err != nil {
			c.log.Info("could not renew this member's listing in the registry; will try again", "err", err)
		}
	})
}

// unlist drops this member from the registry, if any, as it leaves.
func (c *Cluster) unlist() {
	if c.registry == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlistTimeout)
	defer cancel()
	if err := c.registry.Unlist(ctx, c.localAddr); err != nil {
		c.log.Warn("could not unlist this member from the registry: its listing lapses instead", "err", err)
	}
}
