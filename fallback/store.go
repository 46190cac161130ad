package fallback

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// Store keeps sliding-window counters in Redis, with the semantics of leaparray.Store.
// It is safe for concurrent use. Every method takes now (ms since the Unix epoch) from
// the caller where time matters; the store never reads the clock for its answers.
// Errors from Redis wrap counter.ErrUnavailable; a Spec outside the contract's bounds
// gets counter.ErrBadWindow or counter.ErrBadBuckets.
type Store struct {
	rdb     redis.UniversalClient
	cfg     Config
	br      *breaker
	cluster bool // rdb is a Cluster client: one script call's keys must share a slot
	version string
	seq     atomic.Uint64 // batch calls made: each call's seq (see Batch)
	loads   loadQueue
}

// Open connects to Redis, checks that it answers, reads its version and loads the
// scripts. It fails (wrapping counter.ErrUnavailable) if Redis cannot be reached, unless
// cfg.Lazy is set. A URL it cannot read gives counter.ErrBadArgument.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	rdb, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", counter.ErrBadArgument, err)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	st := &Store{rdb: rdb, cfg: cfg, br: newBreaker(cfg), cluster: cluster}
	if err := st.checkWait(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%w: %w", counter.ErrBadArgument, err)
	}
	if err := st.start(ctx); err != nil && !cfg.Lazy {
		_ = rdb.Close()
		return nil, err
	}
	return st, nil
}

func (st *Store) start(ctx context.Context) error {
	err := st.guard(ctx, func() error {
		if err := st.rdb.Ping(ctx).Err(); err != nil {
			return unavailable("ping", err)
		}
		info, err := st.rdb.Info(ctx, "server").Result()
		if err != nil {
			return unavailable("info", err)
		}
		st.version = infoField(info, "redis_version")
		if err := st.loadScripts(ctx); err != nil {
			return unavailable("script load", err)
		}
		return nil
	})
	if errors.Is(err, counter.ErrUnavailable) {
		return err
	}
	if err != nil {
		return unavailable("open", err)
	}
	return nil
}

// infoField finds "name:value" in INFO output.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// ServerVersion is the redis_version Redis reported at Open ("" if it did not say, or
// was not reachable with Config.Lazy).
func (st *Store) ServerVersion() string { return st.version }

// HashFieldExpiry reports whether the server has hash-field expiry (HPEXPIRE, Redis
// 7.4+). The store does not need it; see the package doc.
func (st *Store) HashFieldExpiry() bool { return versionAtLeast(st.version, 7, 4) }

func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// Ping checks that Redis answers.
func (st *Store) Ping(ctx context.Context) error {
	if err := st.guard(ctx, func() error { return st.rdb.Ping(ctx).Err() }); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close closes the connections. The store must not be used afterwards.
func (st *Store) Close() error { return st.rdb.Close() }

// ttlMs is the TTL of a counter key: max(2×window, MinTTL), in ms.
func (st *Store) ttlMs(sp leaparray.Spec) int64 {
	return max(2*sp.WindowMs, st.cfg.MinTTL.Milliseconds())
}

func (st *Store) onceTTLMs() int64 { return max(st.cfg.OnceTTL.Milliseconds(), 1) }

// checkSpec applies the contract's bounds on window and buckets (which also keep a
// script's argument lists within Lua's limits).
func checkSpec(sp leaparray.Spec) error {
	return counter.ValidateSpec(sp.WindowMs, sp.Buckets)
}
