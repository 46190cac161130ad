package fallback

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config says which Redis to use and how long to wait for it.
type Config struct {
	// URL names the Redis deployment; see the package doc for the three forms
	// (redis://, redis+sentinel://, redis+cluster://). Timeouts given as URL query
	// parameters (dial_timeout, read_timeout, write_timeout, pool_timeout, max_retries)
	// win over the fields below.
	URL string

	DialTimeout  time.Duration // default 200ms
	ReadTimeout  time.Duration // default 200ms
	WriteTimeout time.Duration // default 200ms
	PoolTimeout  time.Duration // waiting for a free connection; default 200ms
	PoolSize     int           // connections per node; default go-redis's (10 per CPU)

	// MinTTL is the least TTL a counter key gets; the TTL is max(2×window, MinTTL),
	// refreshed on every write. Default 1s, so that a tiny window's key does not vanish
	// while a caller whose clock is a little behind Redis's still counts it.
	MinTTL time.Duration
	// OnceTTL is how long a writer's high-water mark in a hash slot lives after its
	// last write (see Batch): a call sent again within it applies at most once. It
	// costs one small key per writer and slot written within it (see the package doc).
	// Default 1h.
	OnceTTL time.Duration

	// FlushKeys is how many deltas one script call of a Batch merges (in a Cluster,
	// of counters of one hash slot). Default 256.
	FlushKeys int

	// BreakerFailures is how many calls in a row that cannot reach Redis (refused,
	// reset, timed out) open the circuit breaker; negative never opens it. Default 3.
	BreakerFailures int
	// BreakerCooldown is how long the open breaker fails every call at once before one
	// call probes Redis again. Default 1s.
	BreakerCooldown time.Duration
	// OnStateChange, when set, hears false when the breaker opens (Redis is down: the
	// node is degraded) and true when it closes again (recovered). It is called outside
	// the store's locks, never twice at once, and may call the store; quick flaps may be
	// collapsed into the last state. It runs on the goroutine of the call that changed
	// the state, so it should be quick (log, set a flag).
	OnStateChange func(healthy bool)

	// WaitReplicas, above 0, makes every write of the persistence path (write-behind
	// batches, partition stamps, late-write marks) count as confirmed only once that
	// many replicas acknowledged it too (Redis's WAIT, within WaitTimeout); until then it
	// is in doubt and sent again, which applies it at most once. A failover to a replica
	// that lagged then loses no confirmed write (see replicas.go). Default 0: a write is
	// confirmed once the master ran it.
	WaitReplicas int
	// WaitTimeout bounds each WAIT; it must be shorter than the read timeout (which
	// bounds the whole pipeline's replies). Default half the read timeout.
	WaitTimeout time.Duration

	// Lazy makes Open succeed even when Redis cannot be reached (a node may start
	// before its Redis): calls fail with counter.ErrUnavailable until Redis answers, and
	// the scripts load on first use. ServerVersion is then "".
	Lazy bool
}

// Defaults of Config.
const (
	DefaultTimeout = 200 * time.Millisecond
	DefaultMinTTL  = time.Second
	DefaultOnceTTL = time.Hour

	DefaultFlushKeys       = 256
	DefaultBreakerFailures = 3
	DefaultBreakerCooldown = time.Second
)

func (c Config) withDefaults() Config {
	for _, d := range []*time.Duration{&c.DialTimeout, &c.ReadTimeout, &c.WriteTimeout, &c.PoolTimeout} {
		if *d <= 0 {
			*d = DefaultTimeout
		}
	}
	if c.MinTTL <= 0 {
		c.MinTTL = DefaultMinTTL
	}
	if c.OnceTTL <= 0 {
		c.OnceTTL = DefaultOnceTTL
	}
	if c.FlushKeys <= 0 {
		c.FlushKeys = DefaultFlushKeys
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	return c
}

// knobs points at the settings every go-redis option type shares, so that one function
// fills them for the three client kinds.
type knobs struct {
	dial, read, write, pool *time.Duration
	poolSize, maxRetries    *int
	dialerRetries           *int
	ctxTimeout              *bool
}

// apply fills the settings the URL left unset. Retries are off by default: a script whose
// reply was lost may have run, and running it again would count twice; the caller (the
// cluster router) decides what to retry.
func (c Config) apply(k knobs) {
	for _, p := range []struct {
		dst *time.Duration
		v   time.Duration
	}{{k.dial, c.DialTimeout}, {k.read, c.ReadTimeout}, {k.write, c.WriteTimeout}, {k.pool, c.PoolTimeout}} {
		if *p.dst == 0 {
			*p.dst = p.v
		}
	}
	if *k.poolSize == 0 {
		*k.poolSize = c.PoolSize
	}
	if *k.maxRetries == 0 {
		*k.maxRetries = -1
	}
	if *k.dialerRetries == 0 {
		*k.dialerRetries = 1 // go-redis would dial 5 times per attempt
	}
	*k.ctxTimeout = true // a caller's context deadline also bounds the socket calls
}

// newClient parses the URL and makes the matching client.
func newClient(c Config) (redis.UniversalClient, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("fallback: redis URL: %w", err)
	}
	base, kind, _ := strings.Cut(u.Scheme, "+")
	switch kind {
	case "":
		return newSingle(c)
	case "sentinel":
		return newSentinel(c, u, base)
	case "cluster":
		return newCluster(c, u, base)
	}
	return nil, fmt.Errorf("fallback: redis URL scheme %q: want redis, rediss, unix, redis+sentinel or redis+cluster", u.Scheme)
}

func newSingle(c Config) (redis.UniversalClient, error) {
	o, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("fallback: redis URL: %w", err)
	}
	c.apply(knobs{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
		&o.PoolSize, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled})
	return redis.NewClient(o), nil
}

// newSentinel reads redis+sentinel://[user:pass@]host:port[/db]?master=name[&addr=...].
// Unlike go-redis's own form, the userinfo is the master's credentials (as in redis://);
// sentinel_username and sentinel_password authenticate to the sentinels.
func newSentinel(c Config, u *url.URL, base string) (redis.UniversalClient, error) {
	q := u.Query()
	if m := q.Get("master"); m != "" {
		q.Del("master")
		q.Set("master_name", m)
	}
	if q.Get("master_name") == "" {
		return nil, fmt.Errorf("fallback: redis+sentinel URL needs ?master=<name>")
	}
	if u.User != nil {
		q.Set("username", u.User.Username())
		if p, ok := u.User.Password(); ok {
			q.Set("password", p)
		}
	}
	su, sp := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	v := *u
	v.Scheme, v.User, v.RawQuery = base, nil, q.Encode()
	if su != "" || sp != "" {
		v.User = url.UserPassword(su, sp)
	}
	o, err := redis.ParseFailoverURL(v.String())
	if err != nil {
		return nil, fmt.Errorf("fallback: redis+sentinel URL: %w", err)
	}
	c.apply(knobs{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
		&o.PoolSize, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled})
	return redis.NewFailoverClient(o), nil
}

// newCluster reads redis+cluster://[user:pass@]host:port[?addr=host:port&addr=...].
func newCluster(c Config, u *url.URL, base string) (redis.UniversalClient, error) {
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("fallback: redis+cluster URL: database %q: a cluster has only database 0", p)
	}
	v := *u
	v.Scheme, v.Path = base, ""
	o, err := redis.ParseClusterURL(v.String())
	if err != nil {
		return nil, fmt.Errorf("fallback: redis+cluster URL: %w", err)
	}
	c.apply(knobs{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
		&o.PoolSize, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled})
	return redis.NewClusterClient(o), nil
}
