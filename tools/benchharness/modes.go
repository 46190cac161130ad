package benchharness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/ring"
)

// runMode starts the servers for mode m (pinned or not), measures its groups and
// stops the servers.
func (h *harness) runMode(ctx context.Context, m mode) ([]*groupResult, error) {
	set, err := h.startServers(ctx, m.pinned)
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(set.all()...)
	if m.pinned {
		restore, err := pinSelf(clientCPU)
		if err != nil {
			return nil, err
		}
		defer restore()
	}
	var out []*groupResult
	for _, c := range m.cells {
		g := &group{
			id:    fmt.Sprintf("p%d/%s/%s", c.pipeline, c.keys.kind, m.name),
			title: fmt.Sprintf("%s, %s, %s", pipelineLabel(c.pipeline), c.keys.label(), m.name),
			mode:  m.name, pipeline: c.pipeline, keys: c.keys, baseline: "redis-incr",
			sides: append(redisSides(set), respSides(set)...),
		}
		if c.pipeline == 1 {
			g.sides = append(g.sides, httpSides(set)...) // HTTP/1.1 clients do not pipeline
		}
		res, err := h.runGroup(ctx, g)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

func pipelineLabel(p int) string {
	if p == 1 {
		return "unpipelined"
	}
	return fmt.Sprintf("pipelined %d deep", p)
}

// startServers starts a redis-server (scripts loaded), one node and a cluster of
// three; pinned, each on serverCPU with GOMAXPROCS=1.
func (h *harness) startServers(ctx context.Context, pinned bool) (*serverSet, error) {
	o := nodeOpts{}
	if pinned {
		o = nodeOpts{cpus: serverCPU, gomaxprocs: 1}
	}
	h.logf("starting redis-server, one node and three nodes (%s)", map[bool]string{false: "unpinned", true: "pinned to CPU " + serverCPU}[pinned])
	set := &serverSet{}
	var err error
	if set.redis, err = h.startRedis("redis", o.cpus); err != nil {
		return nil, err
	}
	if set.scripts, err = loadScripts(ctx, set.redis.client); err != nil {
		return nil, err
	}
	if set.one, err = h.startNodes("one", 1, o); err != nil {
		return nil, err
	}
	if set.three, err = h.startNodes("three", 3, o); err != nil {
		return nil, err
	}
	return set, nil
}

// runRedisGroups compares a node with --redis and one without on new keys: every
// operation meets a counter the node has never seen, which with Redis it must look
// for there first, unless Redis says it never got a write of the counter's partition
// (a fresh Redis here: no partition stamps). A third node's Redis has every partition
// stamped as written just now, as after a rolling restart, so it loads every new counter.
func (h *harness) runRedisGroups(ctx context.Context) ([]*groupResult, error) {
	backing, err := h.startRedis("redis-backing", "")
	if err != nil {
		return nil, err
	}
	moved, err := h.startRedis("redis-moved", "")
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(backing.proc, moved.proc)
	if err := stampAllWritten(ctx, moved.client); err != nil {
		return nil, err
	}
	plain, err := h.startNodes("plain", 1, nodeOpts{})
	if err != nil {
		return nil, err
	}
	withRedis, err := h.startNodes("withredis", 1, nodeOpts{extra: []string{"--redis", "redis://" + backing.addr + "/0"}})
	if err != nil {
		return nil, err
	}
	afterMove, err := h.startNodes("aftermove", 1, nodeOpts{extra: []string{"--redis", "redis://" + moved.addr + "/0"}})
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(plain[0].proc, withRedis[0].proc, afterMove[0].proc)
	sides := []*side{
		newKeySide("sw-incr-plain", "SW.INCR, no Redis", plain[0], "n0:", plain[0].proc),
		newKeySide("sw-incr-redis", "SW.INCR, --redis (node + redis-server CPU)", withRedis[0], "n1:", withRedis[0].proc, backing.proc),
		newKeySide("sw-incr-redis-loads", "SW.INCR, --redis, every partition written just now: a load per new counter (node + redis-server CPU)",
			afterMove[0], "n2:", afterMove[0].proc, moved.proc),
	}
	var out []*groupResult
	for _, p := range h.plan.redisPipelines {
		g := &group{id: fmt.Sprintf("redis/p%d", p), title: fmt.Sprintf("--redis, %s, %s, unpinned", pipelineLabel(p), newKeys.label()),
			mode: "unpinned", pipeline: p, keys: newKeys, sides: sides, baseline: "sw-incr-plain"}
		res, err := h.runGroup(ctx, g)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// stampAllWritten stamps every partition of the default ring as written now, as the
// nodes' write-behind does (fallback.StampWritten), so that a node loads every counter
// it does not hold.
func stampAllWritten(ctx context.Context, rc *redis.Client) error {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	fields := []any{"e", "bench"}
	for p := 0; p < ring.DefaultPartitionCount; p++ {
		fields = append(fields, strconv.Itoa(p), now)
	}
	return rc.HSet(ctx, fallback.WrittenKey(ring.DefaultPartitionCount), fields...).Err()
}

func newKeySide(id, name string, n *nodeServer, prefix string, servers ...*proc) *side {
	return &side{id: id, name: name, command: swIncrCommand, addr: n.resp, prefix: prefix, servers: servers, request: swIncr}
}

// runMemory checks the Redis loader, then measures each memory case.
func (h *harness) runMemory(ctx context.Context) (loaderCheck, []*memResult, error) {
	chk, err := h.checkLoaderOnce(ctx)
	if err != nil {
		return chk, nil, err
	}
	var out []*memResult
	for _, c := range h.plan.mem {
		steady := h.plan.gcSteady
		if !c.gc {
			steady = 0
		}
		res, err := h.runMemCase(ctx, c, steady)
		if err != nil {
			return chk, nil, err
		}
		out = append(out, res)
	}
	return chk, out, nil
}

func (h *harness) checkLoaderOnce(ctx context.Context) (loaderCheck, error) {
	r, err := h.startRedis("redis-check", "")
	if err != nil {
		return loaderCheck{}, err
	}
	defer h.procs.stopSome(r.proc)
	defer r.client.Close()
	s, err := loadScripts(ctx, r.client)
	if err != nil {
		return loaderCheck{}, err
	}
	return checkLoader(ctx, r, s, full60s, full60s.buckets)
}
