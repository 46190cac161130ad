package cluster

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Name is the local member's name.
func (c *Cluster) Name() string { return c.name }

// LocalAddr is the gossip address peers reach this member at (host:port), with the
// real port when BindAddr asked for port 0.
func (c *Cluster) LocalAddr() string { return c.localAddr }

// Self returns the local member as the table has it.
func (c *Cluster) Self() Member {
	m, _ := c.tab.get(c.name)
	return m
}

// Members returns every member this node knows, the local one included, sorted by
// name: alive and leaving ones, and dead or left ones for a few minutes after.
func (c *Cluster) Members() []Member {
	ms := c.tab.list(nil)
	keep := make(map[string]bool, len(ms))
	for i := range ms {
		ms[i].Version = c.versions.get(ms[i].Name)
		keep[ms[i].Name] = true
	}
	c.versions.keepOnly(keep)
	return ms
}

// Alive returns the members that should own keys (Member.Serving), sorted by name:
// the input of a ring.
func (c *Cluster) Alive() []Member { return c.tab.list(Member.Serving) }

// JoinFailures counts the joins no seed answered (refused, as seeds of another cluster
// label or gossip key refuse, or unreachable), and the registry's silences.
func (c *Cluster) JoinFailures() uint64 { return c.joinFails.Load() }

// Changes returns a channel that receives a value after the member list changed.
// Signals coalesce: one receive may stand for many changes, so the receiver reads
// Members afresh each time. The channel is closed by Shutdown. There is one channel
// per Cluster: give it one receiver.
func (c *Cluster) Changes() <-chan struct{} { return c.tab.changes }

// Joined returns a channel closed once this member is part of a cluster: it saw a
// peer alive, or it had no seeds to join (it is the first member).
func (c *Cluster) Joined() <-chan struct{} { return c.tab.joined }

// MarkLeaving announces, through this member's metadata, that it is about to leave:
// peers list it as leaving, and Alive no longer returns it, so ownership moves away
// while it can still hand its counters on. It waits up to timeout for the update to
// be gossiped, and pushes it to every member over a stream too (pushLeaving).
func (c *Cluster) MarkLeaving(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shutdown {
		return ErrShutdown
	}
	if c.del.leaving.Swap(true) {
		return nil
	}
	deadline := time.Now().Add(timeout)
	err := c.updateNode(timeout)
	c.pushLeaving(time.Until(deadline))
	if err != nil {
		return fmt.Errorf("cluster: announce leaving: %w", err)
	}
	return nil
}

// updateNode gossips this member's new metadata, waiting up to timeout for the
// broadcast to go out, as memberlist's UpdateNode does; but it stops waiting, with no
// error, once no other member is alive or leaving: memberlist gossips to live members
// only, so with every peer gone the broadcast never goes out, and a member of a whole
// cluster stopped at once would wait its whole timeout for nobody.
func (c *Cluster) updateNode(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.ml.UpdateNode(timeout) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if !c.othersListen() {
				return nil
			}
		}
	}
}

// othersListen reports whether another member is alive or leaving: one that still
// hears gossip.
func (c *Cluster) othersListen() bool {
	return len(c.tab.list(func(m Member) bool {
		return m.Name != c.name && (m.State == StateAlive || m.State == StateLeaving)
	})) > 0
}

// pushLeaving exchanges full state with every other member at once (memberlist's
// push-pull, over TCP), waiting up to timeout. Gossip is UDP: a member whose packets
// are lost (a full receive buffer on a loaded host) would hear of the leaving only at
// its next push-pull with this member, seconds away, and forward to it meanwhile ops
// it no longer takes. Best effort: a member not reached still hears it by gossip.
func (c *Cluster) pushLeaving(timeout time.Duration) {
	var wg sync.WaitGroup
	// The member table, not memberlist's Members: those are memberlist's own records,
	// which its gossip goroutines update under a lock this package cannot take.
	others := c.tab.list(func(m Member) bool {
		return m.Name != c.name && (m.State == StateAlive || m.State == StateLeaving)
	})
	for _, m := range others {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			if _, err := c.ml.Join([]string{addr}); err != nil {
				c.log.Debug("leaving not pushed", "member", addr, "err", err)
			}
		}(m.Addr)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(max(timeout, 0)):
	}
}

// SyncWith exchanges full state with the member named name (memberlist's push-pull,
// over TCP, bounded by Timings.TCPTimeout), so that whichever of the two missed gossip
// the other heard learns it now rather than at the next periodic push-pull.
func (c *Cluster) SyncWith(name string) error {
	m, ok := c.tab.get(name)
	if !ok || name == c.name {
		return fmt.Errorf("cluster: sync with %q: not another member", name)
	}
	c.mu.Lock()
	shut := c.shutdown
	c.mu.Unlock()
	if shut {
		return ErrShutdown
	}
	if _, err := c.ml.Join([]string{m.Addr}); err != nil {
		return fmt.Errorf("cluster: sync with %s: %w", name, err)
	}
	return nil
}

// Leave leaves the cluster gracefully: it marks this member leaving if it was not,
// stops re-joining, and broadcasts its departure, waiting up to timeout in all.
// Peers then list it as left. Call Shutdown afterwards.
func (c *Cluster) Leave(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if err := c.MarkLeaving(timeout / 2); err != nil {
		if errors.Is(err, ErrShutdown) {
			return err
		}
		c.log.Warn("leaving without a confirmed announcement", "err", err)
	}
	c.stopJoining() // a re-join would undo the leave
	c.unlist()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shutdown {
		return ErrShutdown
	}
	// Again, now that no join is in progress: a member marked leaving while its first
	// join was under way had not yet heard of the peers it was joining, so the mark went
	// to nobody; they would take its departure for a death.
	c.pushLeaving(time.Until(deadline) / 2)
	if err := c.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip at once; without Leave first, peers will find this member
// dead. It waits for a join in progress to end (at most Timings.TCPTimeout per
// seed), then closes the Changes channel. It is safe to call more than once.
func (c *Cluster) Shutdown() error {
	c.stopJoining()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shutdown {
		return nil
	}
	c.shutdown = true
	err := c.ml.Shutdown()
	c.tab.close()
	return err
}

func (c *Cluster) stopJoining() {
	c.stopOnce.Do(c.stopJoin)
	c.joinDone.Wait()
}

// Refutes counts the times this member refuted a peer's claim that it was suspect or
// dead. A member whose count rose was, for a while, not trusted by its peers, who may
// have acted without it (moved its keys elsewhere).
func (c *Cluster) Refutes() uint64 { return c.refutes.Load() }
