package fallback

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// breaker is the store's circuit breaker. Closed, every call goes to Redis and
// Config.BreakerFailures calls in a row that could not reach it open the breaker. Open,
// every call fails at once with ErrRedisDown until Config.BreakerCooldown has passed;
// then the next call goes to Redis as the probe (half-open) while the others keep
// failing at once. The probe reaching Redis closes the breaker; failing, it opens it for
// another cool-down. Any call that reaches Redis resets the count, and one that says
// nothing about Redis (the caller cancelled) changes nothing.
type breaker struct {
	failures int           // opens after this many unreached calls in a row; < 0 never
	cooldown time.Duration // how long it stays open before a probe
	now      func() time.Time
	onChange func(healthy bool)

	mu         sync.Mutex
	open       bool
	fails      int           // unreached calls in a row, while closed
	until      time.Time     // while open: no probe before this
	probing    bool          // while open: a probe is out
	degraded   bool          // writes not acknowledged by enough replicas: taken as down (replicas.go)
	reported   bool          // the last health given to onChange (true at start)
	delivering bool          // a goroutine is calling onChange
	reopened   atomic.Uint64 // times the breaker closed again after it opened
}

func newBreaker(cfg Config) *breaker {
	return &breaker{failures: cfg.BreakerFailures, cooldown: cfg.BreakerCooldown, now: time.Now,
		onChange: cfg.OnStateChange, reported: true}
}

// admit says whether a call may go to Redis, and whether it is the probe.
func (b *breaker) admit() (probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return false, true
	case b.probing || b.now().Before(b.until):
		return false, false
	}
	b.probing = true
	return true, true
}

// settle records how an admitted call fared.
func (b *breaker) settle(probe bool, r reachability) {
	b.mu.Lock()
	if probe {
		b.probing = false
	}
	before := b.healthyLocked()
	switch r {
	case reached:
		b.fails = 0
		b.open = false
	case unreached:
		switch {
		case b.open && probe:
			b.until = b.now().Add(b.cooldown)
		case !b.open && b.failures >= 0:
			if b.fails++; b.fails >= b.failures {
				b.open, b.fails, b.until = true, 0, b.now().Add(b.cooldown)
			}
		}
	}
	b.changed(before)
}

// replicated records whether the last write's WAIT found enough replicas: while it did
// not, Redis is taken as down, though calls still go to it (the next write's WAIT tells
// when the replicas are back).
func (b *breaker) replicated(ok bool) {
	b.mu.Lock()
	before := b.healthyLocked()
	b.degraded = !ok
	b.changed(before)
}

// changed ends a change of state made under mu: it unlocks mu, counts a return to
// health and tells onChange of a change of health.
func (b *breaker) changed(before bool) {
	after := b.healthyLocked()
	if !before && after {
		b.reopened.Add(1)
	}
	b.mu.Unlock()
	if before != after {
		b.notify()
	}
}

// healthy is false while the breaker is open (half-open included), or while writes are
// not acknowledged by enough replicas.
func (b *breaker) healthy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.healthyLocked()
}

func (b *breaker) healthyLocked() bool { return !b.open && !b.degraded }

// notify calls onChange, outside the lock, until it has been told the current health.
// Calls never overlap: a change during a call is delivered by the goroutine already
// delivering, after that call returns, so onChange may call back into the store. Quick
// flaps may be collapsed, but the last health reported is always the current one, and
// never twice the same in a row.
func (b *breaker) notify() {
	b.mu.Lock()
	if b.onChange == nil || b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	for b.reported != b.healthyLocked() {
		b.reported = b.healthyLocked()
		h := b.reported
		b.mu.Unlock()
		b.onChange(h)
		b.mu.Lock()
	}
	b.delivering = false
	b.mu.Unlock()
}

// guard runs f, one exchange with Redis, under the breaker: while the breaker is open it
// returns ErrRedisDown at once and f does not run, and a ctx already done returns its
// error without trying. f's error says how Redis fared, except that a call cut short by
// the caller's deadline before the store's own read timeout says nothing: a caller in a
// hurry does not make Redis look down.
func (st *Store) guard(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	probe, ok := st.br.admit()
	if !ok {
		return ErrRedisDown
	}
	start := time.Now()
	err := f()
	r := classify(err)
	if r == unreached && cutShort(ctx, start, st.cfg.ReadTimeout) {
		r = neutral
	}
	st.br.settle(probe, r)
	return err
}

// cutShort reports whether a call that started at start ran into the caller's deadline
// (give or take a millisecond: the socket's deadline is the context's, and may fire
// before the context's timer) and that deadline came before the read timeout would have.
// A call refused at once is not cut short, whatever the deadline.
func cutShort(ctx context.Context, start time.Time, timeout time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && dl.Sub(start) < timeout && time.Now().After(dl.Add(-time.Millisecond))
}

// pipelineErr sums up a pipeline's replies for the breaker: nil when any call reached
// Redis, else the first error.
func pipelineErr(cmds []*redis.Cmd) error {
	var first error
	for _, c := range cmds {
		err := c.Err()
		if classify(err) == reached {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Healthy reports whether Redis is taken to be up: false while the breaker is open,
// from the failures that opened it until a probe reaches Redis again. A node reports
// itself "degraded" while it is false. Config.OnStateChange hears of each change.
func (st *Store) Healthy() bool { return st.br.healthy() }

// Reopened counts the times Redis was found reachable again after the store had found it
// unreachable (Healthy went false, then true): Redis may have restarted meanwhile, and
// lost what it held.
func (st *Store) Reopened() uint64 { return st.br.reopened.Load() }
