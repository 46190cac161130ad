package node

import (
	"context"
	"errors"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/leaparray"
)

// openRedis makes the store (within --max-counters and --max-shapes), and with --redis the Redis store behind it. The node
// starts even if Redis is down (it runs degraded until Redis answers).
func (n *Node) openRedis(limits counter.Limits) error {
	bounds := leaparray.WithBounds(leaparray.Bounds{MaxUnits: n.cfg.MaxCounters, MaxShapes: n.cfg.MaxShapes})
	if n.cfg.RedisURL == "" {
		n.store = leaparray.NewStore(bounds)
		return nil
	}
	n.store = leaparray.NewStore(leaparray.WithDeltas(), bounds)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log := n.cfg.Logger.With("component", "redis")
	cfg := fallback.Config{URL: n.cfg.RedisURL, Lazy: true, WaitReplicas: n.cfg.RedisWaitReplicas, WaitTimeout: n.cfg.RedisWaitTimeout}
	cfg.OnStateChange = func(healthy bool) {
		switch {
		case healthy:
			log.Info("redis reachable again: write-behind resumes")
		case n.redis != nil && n.redis.ReplicasBehind(): // (set before any call but Open's own)
			log.Error("redis replicas behind: fewer than --redis-wait-replicas acknowledge writes; degraded as with Redis down (counters in memory keep being decided; write-behind waits)")
		default:
			log.Error("redis unreachable: degraded (counters in memory keep being decided; write-behind waits)")
		}
	}
	st, err := fallback.Open(ctx, cfg)
	if errors.Is(err, fallback.ErrWaitTimeout) {
		return &ConfigError{"redis-wait-timeout", err.Error()}
	}
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
