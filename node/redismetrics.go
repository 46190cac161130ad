package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/owner"
)

// timedRedis is the owner's Redis with its loads timed
// (leapcount_redis_load_duration_seconds): each load of counters not in memory
// before their first op, from the call to its answer.
type timedRedis struct {
	owner.Redis
	took prometheus.Histogram
}

// timeLoads wraps r (nil: no Redis, left nil, as the owner tells by it).
func timeLoads(r owner.Redis, reg prometheus.Registerer) owner.Redis {
	if r == nil {
		return nil
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "leapcount_redis_load_duration_seconds",
		Help:    "Time to load counters not in memory from Redis before their first op (one load may carry several).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	reg.MustRegister(h)
	return timedRedis{Redis: r, took: h}
}

func (t timedRedis) LoadMany(ctx context.Context, refs []fallback.CounterRef, now int64, done func([]fallback.Loaded)) {
	start := time.Now()
	t.Redis.LoadMany(ctx, refs, now, func(got []fallback.Loaded) {
		t.took.Observe(time.Since(start).Seconds())
		done(got)
	})
}
