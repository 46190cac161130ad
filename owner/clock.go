package owner

import (
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/mutate"
	"github.com/leapcount/leapcount/internal/ntp"
)

// The counters' clock against Redis's. Config.Now places every op in its bucket, and
// the load skip (loadskip.go) compares it with what Redis holds; nothing else keeps it in
// line with other nodes' (leases measure elapsed time on the monotonic clock). So the
// owner measures it, at most once every clockEvery while Redis answers, against Redis's
// TIME, as NTP does (internal/ntp): Now before the call, Redis's time, Now after. The
// estimate is known for clockKnownFor after it was made, if the call took at most
// 2*clockMaxErr. While it is not known, or says the counters' clock is more than
// freshMargin off Redis's, no load is skipped (redisHoldsNothing). The skip is safe whatever
// the clocks (it compares stamps and buckets placed by the same clocks), but a clock
// that far off is a fault the operator hears of (node's status problems), and the node
// does not build on it meanwhile: it loads, at the cost of a Redis round trip per new
// counter.
const (
	clockEvery    = time.Second
	clockKnownFor = 10 * time.Second
	clockMaxErr   = 250 * time.Millisecond
)

// clockWatch is the measurement of the counters' clock against Redis's.
type clockWatch struct {
	est       atomic.Pointer[ntp.Estimate] // the last one good enough (nil: none yet)
	measuring atomic.Bool
	last      time.Duration // under Owner.mu: when (Clock.Since) the last measurement began
	// first is when (Clock.Since, as ns + 1; 0: never) the first measurement began: a
	// node that has tried for clockKnownFor and knows nothing says so (RedisClock).
	first atomic.Int64
	// reading is the last reading of Redis's clock on the monotonic clock, however
	// loose: what a reset's deadline is measured from (resetby.go).
	reading atomic.Pointer[redisReading]
}

// measureClock measures the counters' clock against Redis's, when it is due and Redis
// answers. The caller holds mu.
func (o *Owner) measureClock(now time.Duration) {
	c := &o.clock
	if o.cfg.Redis == nil || c.measuring.Load() || c.last != 0 && now-c.last < clockEvery || !o.cfg.Redis.Healthy() {
		return
	}
	c.last = now
	c.first.CompareAndSwap(0, int64(now)+1)
	c.measuring.Store(true)
	o.ask(o.readRedisClock)
}

// readRedisClock reads Redis's clock (TIME) and keeps the estimate when it is tight
// enough. Its outcome takes no step: the estimate is an atomic value.
func (o *Owner) readRedisClock() {
	c := &o.clock
	t0 := o.cfg.Now()
	o.cfg.Redis.Time(func(us int64, err error) {
		t3 := o.cfg.Now()
		defer c.measuring.Store(false)
		if err != nil {
			return
		}
		c.reading.Store(&redisReading{us: us, at: o.cfg.Clock.Since()})
		e := ntp.FromReading(ntp.Ms(t0), time.Duration(us)*time.Microsecond, ntp.Ms(t3), o.cfg.Clock.Since())
		if e.Err <= clockMaxErr {
			c.est.Store(&e)
		}
	})
}

// RedisClock is Redis's clock against this node's counters' clock (Offset > 0: Redis
// is ahead), as last measured; known reports whether the estimate is recent and tight
// enough to go by; overdue, that Redis answers and yet no such estimate was made for
// clockKnownFor (TIME fails, or every call was too slow to tell). Without Redis all
// are zero.
func (o *Owner) RedisClock() (e ntp.Estimate, known, overdue bool) {
	return o.redisClockAt(o.cfg.Clock.Since())
}

// redisClockAt is RedisClock at now (Clock.Since).
func (o *Owner) redisClockAt(now time.Duration) (e ntp.Estimate, known, overdue bool) {
	if o.cfg.Redis == nil {
		return ntp.Estimate{}, false, false
	}
	if p := o.clock.est.Load(); p != nil {
		e = *p
	}
	known = e.Known(now, clockKnownFor, clockMaxErr)
	since := e.At
	if since == 0 {
		if f := o.clock.first.Load(); f != 0 {
			since = time.Duration(f - 1)
		} else {
			since = now
		}
	}
	overdue = !known && o.cfg.Redis.Healthy() && now-since > clockKnownFor
	return e, known, overdue
}

// clockAgrees reports whether the counters' clock is known to be within freshMargin of
// Redis's: the load skip's condition (redisHoldsNothing).
func (o *Owner) clockAgrees() bool {
	if mutate.On(mutate.IgnoreClocks) {
		return true
	}
	e := o.clock.est.Load()
	return e != nil && e.Known(o.cfg.Clock.Since(), clockKnownFor, clockMaxErr) && e.Within(freshMargin)
}

// ClockMargin is how far the counters' clock may be from Redis's for this node to skip
// loads (freshMargin); an operator should hear of half of it (node's status problems).
const ClockMargin = freshMargin
