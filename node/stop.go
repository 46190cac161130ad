package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/route"
)

// Stopping: a graceful stop hands this node's partitions on (or, when no member stays,
// stops whole), settles its write-behind, drains the rpc server and leaves the cluster.

// Stop stops the node gracefully: /readyz turns 503, new operations are refused,
// in-flight requests finish (up to ShutdownTimeout or ctx), and the listeners close.
// Calling it again returns the first call's result.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() { n.stopErr = n.stop(ctx) })
	return n.stopErr
}

func (n *Node) stop(ctx context.Context) error {
	n.stopping.Store(true)
	n.cfg.Logger.Info("node stopping", "name", n.cfg.Name)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	close(n.quit)
	// Client requests first: HTTP Shutdown waits for in-flight requests; the router then
	// refuses whatever still arrives on open RESP connections until they close.
	err := n.httpSrv.Shutdown(ctx)
	if n.grpc != nil {
		n.grpc.Stop(ctx)
	}
	n.router.SetAdmission(route.Stopping)
	// RESP takes no new connections. Redis Cluster clients keep theirs until the drain
	// is done: their ops are answered -TRYAGAIN while this node still owns their keys,
	// and -MOVED to the new owners once it does not, so they follow the move.
	for _, ln := range []net.Listener{n.respLn, n.respTLSLn} {
		if ln != nil {
			ln.Close()
		}
	}
	// Then the cluster: announce that we are leaving, so peers route our keys elsewhere;
	// answer forwards that still arrive "not owner" (certainly not decided, so the
	// sender routes them again) until they stop; only then close the connections, so
	// that no peer is left with a request whose fate it cannot know.
	err = errors.Join(err, n.drain(ctx))
	n.sayIfNotPersisted()
	if n.respClusterLn != nil {
		n.redisCluster.handOver(ctx)
	}
	err = errors.Join(err, n.resp.Close())
	n.settleWriteBehind(ctx)
	err = errors.Join(err, n.leave(ctx))
	n.stopLeases()
	n.leaseLoop.Wait()
	err = errors.Join(err, n.rpcSrv.Close(), n.rpcClient.Close())
	n.serving.Wait()
	n.closeClientTLS()
	n.peerAuth.Close()
	n.owner.Close() // the last write-behind
	n.loops.Wait()
	n.closeRedis()
	if err != nil {
		return fmt.Errorf("node: stop: %w", err)
	}
	n.cfg.Logger.Info("node stopped", "name", n.cfg.Name)
	return nil
}

// drainQuiet is how long the rpc server must go without a request before a leaving
// node takes it that every peer routes elsewhere.
const drainQuiet = 300 * time.Millisecond

// drain marks this node leaving and waits (bounded by ctx) until its own ring no longer
// holds it and peers have stopped forwarding to it.
func (n *Node) drain(ctx context.Context) error {
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d)/2, 0)
	}
	n.owner.Leave() // before the news: no counters are handed here from now on
	if err := n.cluster.MarkLeaving(timeout); err != nil && !errors.Is(err, cluster.ErrShutdown) {
		return err
	}
	for {
		held := false // a node that never joined has no ring: nothing to hand on
		if rg := n.router.Ring(); rg != nil {
			_, held = rg.Member(n.cfg.Name)
		}
		if n.noneStays() {
			// Nobody to hand its counters to, nor to forward here: the cluster stops whole
			// (or this node was alone).
			return n.stopWhole(ctx)
		}
		out := n.outOfVoters()
		if !held && n.rpcSrv.IdleFor() >= drainQuiet {
			if n.respClusterLn != nil {
				// Peers route elsewhere: cluster clients may be sent to the new owners now,
				// rather than told to try again here while the voters drop this node.
				n.redisCluster.redirectAll()
			}
			if out {
				// Our partitions are released (counters written to Redis, or sent to their
				// new owners) once the release started by the ring change is done.
				return n.owner.WaitReleased(ctx)
			}
		}
		select {
		case <-ctx.Done():
			n.cfg.Logger.Warn("leaving before peers stopped forwarding here, or before the voters dropped this node",
				"held_in_own_ring", held, "voter", !out)
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// outOfVoters reports whether this leaving node is no longer needed among the voters:
// the change dropping it was chosen, or no other voter stays (they leave too, or are
// gone). A voter that stopped before its drop was chosen would count against every
// majority of the set: two leaves in a row from four voters would leave two of four,
// and no change could ever be chosen again.
func (n *Node) outOfVoters() bool {
	voters := n.keeper.Voters()
	if !slices.Contains(voters, n.cfg.Name) {
		return true
	}
	for _, m := range n.cluster.Members() {
		if m.Name != n.cfg.Name && m.State == cluster.StateAlive && slices.Contains(voters, m.Name) {
			return false
		}
	}
	return true
}

// noneStays reports whether gossip shows no other member alive: each is leaving too,
// has left or is dead. A member that is leaving takes no counters in (owner.Leave), so
// handoffs to it can only be refused.
func (n *Node) noneStays() bool {
	for _, m := range n.cluster.Members() {
		if m.Name != n.cfg.Name && m.State == cluster.StateAlive {
			return false
		}
	}
	return true
}

// MsgNotPersisted is logged once by a node without Redis that stops with no member
// staying to take its counters (the whole cluster stops, or it was alone): they are
// gone with it, and with the others.
const MsgNotPersisted = "stopping with no member staying and no --redis: this node's counts are not persisted"

// stopWhole ends the drain of a node that no member stays for. With Redis, its
// releases write their counters there (bounded by ctx) and the owner's last flush the
// rest. Without Redis there is nowhere for them to go: waiting for handoffs that every
// receiver refuses (they leave too) would only use up the shutdown timeout.
func (n *Node) stopWhole(ctx context.Context) error {
	if n.redis != nil {
		return n.owner.WaitReleased(ctx)
	}
	return nil
}

// sayIfNotPersisted logs MsgNotPersisted once the drain is over, if it applies:
// whichever way the drain ended (it may have handed counters to members that have
// begun to leave since).
func (n *Node) sayIfNotPersisted() {
	if n.redis == nil && n.noneStays() {
		// Handoffs still under way would be refused by members that leave too: they are
		// given up here, and this line says so, rather than an error per handoff.
		n.cfg.Logger.Info(MsgNotPersisted, "counters_on_their_way", n.owner.DropReleases())
	}
}

// settleWriteBehind waits, before this node leaves the cluster, while write-behind it
// handed on is in doubt (Owner.SettleInDoubt), keeping a part of ctx back for the leave
// itself: a leave not heard in time makes peers take this node for failed.
func (n *Node) settleWriteBehind(ctx context.Context) {
	if n.redis == nil {
		return // no write-behind: nothing can be in doubt
	}
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-min(time.Second, time.Until(d)/4)))
		defer cancel()
	}
	if !n.owner.SettleInDoubt(ctx) {
		n.cfg.Logger.Warn("leaving with write-behind in doubt: its receivers drop their fences once this run is over, and what it did not apply is lost")
	}
}

// leaveWhole bounds the leave of a node that no member stays for (noneStays).
const leaveWhole = 500 * time.Millisecond

// leave tells the cluster we are going, waits (bounded by ctx) for it to be heard, and
// stops gossip.
func (n *Node) leave(ctx context.Context) error {
	timeout := time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), 0)
	}
	lvl := slog.LevelWarn
	if n.noneStays() {
		// The others leave too: they may be gone before the broadcast reaches them, and
		// waiting the whole timeout for it would delay the stop of the whole cluster.
		timeout, lvl = min(timeout, leaveWhole), slog.LevelDebug
	}
	err := n.cluster.Leave(timeout)
	if errors.Is(err, cluster.ErrShutdown) {
		err = nil
	}
	if err != nil {
		// Typically no peer is left to hear the broadcast (the whole cluster is stopping).
		// Peers that are there will find this node gone anyway: not worth a failed stop.
		n.cfg.Logger.Log(ctx, lvl, "leave not confirmed by peers", "err", err)
		err = nil
	}
	return errors.Join(err, n.cluster.Shutdown())
}
