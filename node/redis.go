package node

import (
	"context"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// openRedis makes the store, and with --redis the Redis store behind it. The node
// starts even if Redis is down (it runs degraded until Redis answers).
func (n *Node) openRedis(limits counter.Limits) error {
	if n.cfg.RedisURL == "" {
		n.store = leaparray.NewStore()
		return nil
	}
	n.store = leaparray.NewStore(leaparray.WithDeltas())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log := n.cfg.Logger.With("component", "redis")
	st, err := fallback.Open(ctx, fallback.Config{URL: n.cfg.RedisURL, Lazy: true, OnStateChange: func(healthy bool) {
		if healthy {
			log.Info("redis reachable again: write-behind resumes")
		} else {
			log.Error("redis unreachable: degraded (counters keep being decided in memory; write-behind and fallback wait)")
		}
	}})
	if err != nil {
		return &ConfigError{"redis", err.Error()}
	}
	n.redis = st
	return nil
}

func (n *Node) closeRedis() {
	if n.redis != nil {
		n.redis.Close()
	}
}

// journal tells owner which of its counters were decided on Redis without it.
func (n *Node) journal(ctx context.Context, owner string, ops []counter.Op) {
	refs := make([]fallback.CounterRef, len(ops))
	for i, op := range ops {
		refs[i] = fallback.CounterRef{Key: op.Key, Spec: leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}}
	}
	if err := n.redis.Journal(ctx, owner, refs); err != nil {
		n.cfg.Logger.Debug("journal not written", "owner", owner, "err", err)
	}
}

// redisStatus is "off" without --redis, else "up" or "down".
func (n *Node) redisStatus() string {
	switch {
	case n.redis == nil:
		return "off"
	case n.redis.Healthy():
		return "up"
	}
	return "down"
}
