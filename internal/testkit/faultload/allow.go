package faultload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/history"
)

// AllowConfig shapes an Allows.
type AllowConfig struct {
	Keys    int    // default 4
	Limit   int64  // default 50
	Window  string // default "10m"
	Workers int    // default 4
	Seed    uint64
	Timeout time.Duration // per request (default 3s)
	Pace    time.Duration // between one worker's requests (default 5ms)
}

// Allows sends SW.ALLOW key window limit through random nodes over a few keys, and
// records what each client was told (package history): a key's final count must not
// pass its limit, nor fall below the admissions acknowledged.
type Allows struct {
	cfg   AllowConfig
	gen   *Gen // for its clients and addresses
	log   history.Log
	keys  []string
	stats struct{ sent, acked, failed, unknown atomic.Int64 }
}

// NewAllows makes an Allows sending through addrs (RESP).
func NewAllows(cfg AllowConfig, addrs ...string) *Allows {
	if cfg.Keys <= 0 {
		cfg.Keys = 4
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 50
	}
	if cfg.Window == "" {
		cfg.Window = "10m"
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Pace <= 0 {
		cfg.Pace = 5 * time.Millisecond
	}
	a := &Allows{cfg: cfg, gen: New(Config{Keys: 1, Workers: cfg.Workers, Seed: cfg.Seed, Timeout: cfg.Timeout}, addrs...)}
	for i := 0; i < cfg.Keys; i++ {
		a.keys = append(a.keys, fmt.Sprintf("allow:%d:%d", cfg.Seed, i))
	}
	return a
}

// SetAddrs changes the nodes requests go through.
func (a *Allows) SetAddrs(addrs ...string) { a.gen.SetAddrs(addrs...) }

// Run sends allows until ctx ends.
func (a *Allows) Run(ctx context.Context) {
	paced(ctx, a.cfg.Workers, a.cfg.Pace, func(w int) *rand.Rand { return rand.New(rand.NewPCG(a.cfg.Seed, uint64(w))) },
		func(rng *rand.Rand) {
			k, addr := rng.IntN(len(a.keys)), a.gen.pickAddr(rng)
			a.one(a.keys[k], addr)
		})
}

// paced runs workers goroutines, each calling one with its own rng (made by rngOf)
// then waiting pace, until ctx ends.
func paced(ctx context.Context, workers int, pace time.Duration, rngOf func(w int) *rand.Rand, one func(*rand.Rand)) {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(rng *rand.Rand) {
			defer wg.Done()
			for ctx.Err() == nil {
				one(rng)
				select { // pacing, not a stand-in for a condition
				case <-ctx.Done():
				case <-time.After(pace):
				}
			}
		}(rngOf(w))
	}
	wg.Wait()
}

func (a *Allows) one(key, addr string) {
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.gen.cfg.Timeout)
	defer cancel()
	vals, err := a.gen.client(addr).Do(ctx, "SW.ALLOW", key, a.cfg.Window, a.cfg.Limit).Int64Slice()
	allowed, o := AllowOutcome(vals, err)
	a.log.Allow(key, a.cfg.Limit, 1, allowed, o)
	a.stats.sent.Add(1)
	switch o {
	case history.OK:
		a.stats.acked.Add(1)
	case history.Failed:
		a.stats.failed.Add(1)
	default:
		a.stats.unknown.Add(1)
	}
}

// Stats are the allows sent so far by outcome (an answer, allowed or denied, is acked).
func (a *Allows) Stats() Stats {
	return Stats{Sent: a.stats.sent.Load(), Acked: a.stats.acked.Load(), Failed: a.stats.failed.Load(), Unknown: a.stats.unknown.Load()}
}

// Admitted is, per key, the admissions acknowledged so far: snapshots taken around a
// fault tell what was admitted meanwhile.
func (a *Allows) Admitted() map[string]int64 {
	out := make(map[string]int64, len(a.keys))
	for _, k := range a.keys {
		out[k] = a.log.Tally(k).Admitted
	}
	return out
}

// OutcomeOf is what a RESP reply's error (go-redis) says of its op: ok, failed (an error
// reply, or never sent) or unknown (sent, no reply; or an "outcome unknown" error).
func OutcomeOf(err error) history.Outcome {
	switch classify(err) {
	case outcomeAcked:
		return history.OK
	case outcomeFailed:
		return history.Failed
	}
	return history.Unknown
}

// AllowOutcome is what an SW.ALLOW reply (go-redis's Int64Slice) says of its op:
// whether it was allowed, and its outcome (OutcomeOf). A reply that is not 4 integers,
// or whose count is negative (the fail policy's answer: nothing was decided), is
// Unknown.
func AllowOutcome(vals []int64, err error) (allowed bool, o history.Outcome) {
	if o = OutcomeOf(err); o != history.OK {
		return false, o
	}
	if len(vals) != 4 || vals[1] < 0 {
		return false, history.Unknown
	}
	return vals[0] == 1, history.OK
}

// Check reads the keys' counts through c and checks them against what was answered.
func (a *Allows) Check(ctx context.Context, c Counter, b history.Bounds) (history.Summary, error) {
	counts, err := c.Counts(ctx, a.keys, a.cfg.Window)
	if err != nil {
		return history.Summary{}, err
	}
	final := make(map[string]int64, len(a.keys))
	for i, k := range a.keys {
		final[k] = counts[i]
	}
	return a.log.Check(final, b), nil
}

// Close closes the connections.
func (a *Allows) Close() { a.gen.Close() }
