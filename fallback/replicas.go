package fallback

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Writes confirmed on replicas (Config.WaitReplicas). While the last write's WAIT found
// too few replicas, the store reports itself unhealthy, as with Redis down: what waits
// for Redis to confirm a write (a handed-in counter's load, say) would wait in vain,
// and the owner decides as it does without Redis until a WAIT finds them again.
// Redis replicates asynchronously:
// a master that ran a write and then failed over to a replica that had not received it
// yet loses it, and the stamps' epoch (written.go) does not change, so no node sees the
// loss. The persistence path relies on a confirmed write staying in Redis (a release
// lets its partition go once Redis confirmed its deltas; the next owner loads them), so
// with WaitReplicas a pipeline of writes ends with WAIT on its own connection (in a
// Cluster, one pipeline per master: pipelineByMaster), and its writes are confirmed only
// if enough replicas acknowledged them in time. Otherwise
// they are in doubt: they ran on the master, and may be lost by a failover. Sending
// them again is safe either way, since every write here applies at most once (a batch
// call's seq, a stamp that never goes back, a late mark's sequence), and after a
// failover that lost them they apply on the new master.
//
// WAIT waits for the replication offset of the connection's last write. A batch call
// found applied before changes no counter, but refreshes its writer key's TTL
// (merge_many.lua), so that its WAIT covers the earlier run, made perhaps on another
// connection, whatever the server version (Redis 7.0 moves the connection's offset on
// for such a call anyway).

// ErrNotReplicated wraps the error of a write Redis ran and fewer than
// Config.WaitReplicas replicas acknowledged within Config.WaitTimeout.
var ErrNotReplicated = errors.New("written on the master, not yet on enough replicas")

// ErrWaitTimeout is Open's error for a Config.WaitTimeout it cannot use.
var ErrWaitTimeout = errors.New("fallback: WaitTimeout")

// checkWait checks the replica settings against the client and fills WaitTimeout's
// default.
func (st *Store) checkWait() error {
	c := &st.cfg
	switch {
	case c.WaitReplicas < 0:
		return fmt.Errorf("fallback: WaitReplicas %d: want 0 (off) or more", c.WaitReplicas)
	case c.WaitReplicas == 0:
		return nil
	}
	read := c.ReadTimeout // the URL's read_timeout, if it set one:
	switch cl := st.rdb.(type) {
	case *redis.Client:
		read = cl.Options().ReadTimeout
	case *redis.ClusterClient:
		read = cl.Options().ReadTimeout
	}
	if c.WaitTimeout <= 0 {
		c.WaitTimeout = read / 2
	}
	if c.WaitTimeout < 1e6 || c.WaitTimeout >= read {
		return fmt.Errorf("%w %v: want at least 1ms and below the read timeout (%v)", ErrWaitTimeout, c.WaitTimeout, read)
	}
	return nil
}

// addWait queues a WAIT on pipe when writes must reach replicas (nil otherwise).
func (st *Store) addWait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	if st.cfg.WaitReplicas == 0 {
		return nil
	}
	cmd := redis.NewIntCmd(ctx, "wait", st.cfg.WaitReplicas, st.cfg.WaitTimeout.Milliseconds())
	_ = pipe.Process(ctx, cmd) // queued: Exec sends it after the writes
	return cmd
}

// replicaVerdict is what one WAIT found.
type replicaVerdict int8

const (
	notWaited      replicaVerdict = iota // no WAIT, or Redis not reached (the breaker's business)
	replicasBehind                       // fewer replicas than WaitReplicas acknowledged
	replicasKept                         // enough replicas acknowledged
)

// replicated is what wait, the WAIT of a pipeline, says of its writes: nil when they
// reached enough replicas (or none was asked for), else the error each of them gets;
// and its verdict first, for noteReplicas.
func (st *Store) replicated(wait *redis.IntCmd) (replicaVerdict, error) {
	if wait == nil {
		return notWaited, nil
	}
	n, err := wait.Result()
	switch {
	case err != nil:
		return notWaited, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	case n < int64(st.cfg.WaitReplicas):
		return replicasBehind, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, n, st.cfg.WaitReplicas, st.cfg.WaitTimeout)
	}
	return replicasKept, nil
}

// noteReplicas tells the breaker what the WAITs of one send found: behind if any
// master's replicas were (in a Cluster, one master's WAIT must not clear another's),
// else kept if any WAIT was answered.
func (st *Store) noteReplicas(vs ...replicaVerdict) {
	found := notWaited
	for _, v := range vs {
		if v == replicasBehind {
			st.br.replicated(false)
			return
		}
		found = max(found, v)
	}
	if found == replicasKept {
		st.br.replicated(true)
	}
}

// ReplicasBehind reports whether the last write's WAIT found fewer replicas than
// Config.WaitReplicas: Healthy is false meanwhile.
func (st *Store) ReplicasBehind() bool {
	st.br.mu.Lock()
	defer st.br.mu.Unlock()
	return st.br.degraded
}

// runDurable runs one write script call as a pipeline of its own, so that its WAIT
// (with WaitReplicas) covers it; without WaitReplicas it is run.
func (st *Store) runDurable(ctx context.Context, c call) *redis.Cmd {
	if st.cfg.WaitReplicas == 0 {
		return st.run(ctx, c)
	}
	cmds, _ := st.runAll(ctx, []call{c})
	return cmds[0]
}

// pipelineByMaster runs calls on a Cluster with WaitReplicas: a pipeline per master
// (the one each call's slot is on), each ending with its WAIT. go-redis's own Cluster
// pipeline cannot be used: it spreads the calls over connections that a WAIT, which
// counts the replicas that have its own connection's last write, cannot follow. A call
// a master refused with MOVED or ASK (slots moved: a failover, a resharding) did not
// run; the slot map is reloaded for the next send.
func (st *Store) pipelineByMaster(ctx context.Context, cc *redis.ClusterClient, calls []call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	var masters []*redis.Client
	groups := map[*redis.Client][]int{}
	for i, c := range calls {
		m, err := cc.MasterForKey(ctx, c.keys[0])
		if err != nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(err)
			continue
		}
		if _, ok := groups[m]; !ok {
			masters = append(masters, m)
		}
		groups[m] = append(groups[m], i)
	}
	moved := false
	verdicts := make([]replicaVerdict, 0, len(masters))
	for _, m := range masters {
		pipe := m.Pipeline()
		for _, i := range groups[m] {
			cmds[i] = calls[i].evalSha(ctx, pipe)
		}
		wait := st.addWait(ctx, pipe)
		_, _ = pipe.Exec(ctx) // each command carries its own error
		v, notReplicated := st.replicated(wait)
		verdicts = append(verdicts, v)
		for _, i := range groups[m] {
			switch err := cmds[i].Err(); {
			case err != nil:
				moved = moved || redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
			case notReplicated != nil:
				cmds[i].SetErr(notReplicated)
			}
		}
	}
	st.noteReplicas(verdicts...)
	if moved {
		cc.ReloadState(ctx)
	}
	return cmds
}

// ProbeReplicas, while the last write's WAIT found too few replicas (ReplicasBehind),
// writes a probe key (on every master, in a Cluster) and waits for the replicas as
// every write does: once they acknowledge it, the store is healthy again. Without it a
// node with nothing to write would stay unhealthy for good (reads of counters not in
// memory refused, allows answered by the fail policy), since only a write's WAIT can
// find the replicas back. It does nothing while the replicas keep up, or without
// Config.WaitReplicas.
func (st *Store) ProbeReplicas(ctx context.Context, nowMs int64) error {
	if st.cfg.WaitReplicas == 0 || !st.ReplicasBehind() {
		return nil
	}
	tags := []string{oneServerTag}
	if cc, ok := st.rdb.(*redis.ClusterClient); ok {
		var err error
		if tags, err = masterTags(ctx, cc); err != nil {
			return unavailable("probe", err)
		}
	}
	calls := make([]call, len(tags))
	for i, t := range tags {
		calls[i] = call{script: scripts.probe, keys: []string{probeKey(t)}, args: []any{nowMs, 60_000}}
	}
	cmds, _ := st.runAll(ctx, calls)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return unavailable("probe", err)
		}
	}
	return nil
}

// masterTags is a hash tag in a slot of each slot range of the Cluster: one key per
// range reaches every master.
func masterTags(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	tags := make([]string, 0, len(ranges))
	for _, r := range ranges {
		tags = append(tags, slotTag(uint16(r.Start)))
	}
	return tags, nil
}
