package faultload

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config shapes a Gen; zero fields take the defaults.
type Config struct {
	Keys    int           // number of keys (default 2000)
	Prefix  string        // key prefix (default "load:<seed>:")
	Window  string        // counter window (default "10m"; 10 buckets)
	Workers int           // concurrent senders (default 8)
	Seed    uint64        // picks keys and nodes; print it to replay a run
	Timeout time.Duration // per request (default 3s)
	Rate    int           // total increments per second at most; 0: as fast as replies come
}

func (c Config) withDefaults() Config {
	if c.Keys <= 0 {
		c.Keys = 2000
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("load:%d:", c.Seed)
	}
	if c.Window == "" {
		c.Window = "10m"
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
	return c
}

// Gen is a load generator with per-key tallies.
type Gen struct {
	cfg  Config
	keys []string

	acked, failed, unknown []atomic.Int64
	failingSince           []atomic.Int64 // per key: unix ns a failing stretch began; 0: none
	lastFailed             []atomic.Int64 // per key: unix ns the last failing request began
	longest                atomic.Int64   // ns: the longest stretch so far
	longestFrom            atomic.Int64   // unix ns the longest stretch began (approximate: set after longest)
	longestLastFail        atomic.Int64   // unix ns its last failing request began
	slowest                atomic.Int64   // ns: the slowest answer that succeeded

	addrs atomic.Pointer[[]string]

	mu       sync.Mutex
	clients  map[string]*redis.Client
	inflight map[string]*atomic.Int64 // requests sent to each address and not yet answered
	run      *run
	errs     []string // the first few distinct error messages
	errSeen  map[string]bool
}

// New makes a generator that sends through addrs (RESP host:port).
func New(cfg Config, addrs ...string) *Gen {
	cfg = cfg.withDefaults()
	g := &Gen{cfg: cfg, keys: make([]string, cfg.Keys), clients: map[string]*redis.Client{}, inflight: map[string]*atomic.Int64{}, errSeen: map[string]bool{}}
	for i := range g.keys {
		g.keys[i] = fmt.Sprintf("%s%d", cfg.Prefix, i)
	}
	g.acked = make([]atomic.Int64, cfg.Keys)
	g.failed = make([]atomic.Int64, cfg.Keys)
	g.unknown = make([]atomic.Int64, cfg.Keys)
	g.failingSince = make([]atomic.Int64, cfg.Keys)
	g.lastFailed = make([]atomic.Int64, cfg.Keys)
	g.SetAddrs(addrs...)
	return g
}

// Keys are the keys the generator increments.
func (g *Gen) Keys() []string { return g.keys }

// Window is the counters' window.
func (g *Gen) Window() string { return g.cfg.Window }

// SetAddrs changes the nodes requests go through (takes effect for the next request).
func (g *Gen) SetAddrs(addrs ...string) {
	a := append([]string(nil), addrs...)
	g.addrs.Store(&a)
}

// Close stops a run and closes the connections.
func (g *Gen) Close() {
	g.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.clients {
		c.Close()
	}
	g.clients = map[string]*redis.Client{}
}

func (g *Gen) client(addr string) *redis.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.clients[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: g.cfg.Workers,
			DialTimeout: time.Second, ReadTimeout: g.cfg.Timeout, WriteTimeout: g.cfg.Timeout,
			PoolTimeout: g.cfg.Timeout, DisableIdentity: true, DialerRetries: 1})
		g.clients[addr] = c
	}
	return c
}

// noteErr keeps the first few distinct error messages for reports.
func (g *Gen) noteErr(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	msg := err.Error()
	if len(g.errs) < 8 && !g.errSeen[msg] {
		g.errSeen[msg] = true
		g.errs = append(g.errs, msg)
	}
}

// Errors are the first few distinct error messages seen, for reports.
func (g *Gen) Errors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.errs...)
}

// Counts are per-key tallies, indexed like Keys.
type Counts struct {
	Keys                   []string
	Acked, Failed, Unknown []int64
}

// Snapshot copies the tallies (safe while a run goes on).
func (g *Gen) Snapshot() Counts {
	c := Counts{Keys: g.keys, Acked: make([]int64, len(g.keys)), Failed: make([]int64, len(g.keys)), Unknown: make([]int64, len(g.keys))}
	for i := range g.keys {
		c.Acked[i] = g.acked[i].Load()
		c.Failed[i] = g.failed[i].Load()
		c.Unknown[i] = g.unknown[i].Load()
	}
	return c
}

// Totals sums the tallies over the keys.
func (c Counts) Totals() (acked, failed, unknown int64) {
	for i := range c.Keys {
		acked += c.Acked[i]
		failed += c.Failed[i]
		unknown += c.Unknown[i]
	}
	return
}

// Sub is c minus an earlier snapshot of the same generator: what happened in between.
func (c Counts) Sub(earlier Counts) Counts {
	d := Counts{Keys: c.Keys, Acked: make([]int64, len(c.Keys)), Failed: make([]int64, len(c.Keys)), Unknown: make([]int64, len(c.Keys))}
	for i := range c.Keys {
		d.Acked[i] = c.Acked[i] - earlier.Acked[i]
		d.Failed[i] = c.Failed[i] - earlier.Failed[i]
		d.Unknown[i] = c.Unknown[i] - earlier.Unknown[i]
	}
	return d
}

// pick returns a random key index and address.
func (g *Gen) pick(rng *rand.Rand) (int, string) {
	return rng.IntN(len(g.keys)), g.pickAddr(rng)
}

// pickAddr returns a random address ("" when there is none).
func (g *Gen) pickAddr(rng *rand.Rand) string {
	addrs := *g.addrs.Load()
	if len(addrs) == 0 {
		return ""
	}
	return addrs[rng.IntN(len(addrs))]
}
