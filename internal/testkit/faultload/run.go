package faultload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats sum up one run.
type Stats struct {
	Sent                   int64 // requests started
	Acked, Failed, Unknown int64
	Elapsed                time.Duration
}

// Rate is acknowledged increments per second.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Acked) / s.Elapsed.Seconds()
}

// run is one bounded run of the workers.
type run struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	budget atomic.Int64 // operations left to start
	stats  struct{ sent, acked, failed, unknown atomic.Int64 }

	endOnce sync.Once
	end     Stats
}

// runs counts runs, so that each run's workers draw other random numbers.
var runs atomic.Uint64

// Start begins a run that ends by itself after d or after maxOps increments (whichever
// comes first; both must be positive), or when Stop is called. A run still going is
// stopped first.
func (g *Gen) Start(d time.Duration, maxOps int64) {
	if d <= 0 || maxOps <= 0 {
		panic("load: Start needs a positive duration and operation count")
	}
	g.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	r := &run{cancel: cancel, start: time.Now()}
	r.budget.Store(maxOps)
	nrun := runs.Add(1)
	var pace time.Duration
	if g.cfg.Rate > 0 {
		pace = time.Duration(float64(time.Second) * float64(g.cfg.Workers) / float64(g.cfg.Rate))
	}
	for w := 0; w < g.cfg.Workers; w++ {
		rng := rand.New(rand.NewPCG(g.cfg.Seed, nrun<<16|uint64(w)))
		r.wg.Add(1)
		go g.work(ctx, r, rng, pace)
	}
	g.mu.Lock()
	g.run = r
	g.mu.Unlock()
}

// Wait waits for the current run to end by itself and returns its stats.
func (g *Gen) Wait() Stats {
	g.mu.Lock()
	r := g.run
	g.mu.Unlock()
	if r == nil {
		return Stats{}
	}
	return r.finish()
}

// Stop ends the current run, waits until every request it sent has its answer (or its
// timeout) and returns its stats. After Stop the tallies hold still.
func (g *Gen) Stop() Stats {
	g.mu.Lock()
	r := g.run
	g.mu.Unlock()
	if r == nil {
		return Stats{}
	}
	r.cancel()
	return r.finish()
}

func (r *run) finish() Stats {
	r.wg.Wait()
	r.endOnce.Do(func() {
		r.cancel()
		r.end = Stats{Sent: r.stats.sent.Load(), Acked: r.stats.acked.Load(), Failed: r.stats.failed.Load(),
			Unknown: r.stats.unknown.Load(), Elapsed: time.Since(r.start)}
	})
	return r.end
}

// work sends increments until the run's context ends or its budget is spent. A request
// already sent is given its own timeout, not the run's context: stopping a run must not
// turn answers on their way into unknowns.
func (g *Gen) work(ctx context.Context, r *run, rng *rand.Rand, pace time.Duration) {
	defer r.wg.Done()
	next := time.Now()
	retry := -1 // a key whose last request failed: this worker sends it next
	for ctx.Err() == nil && r.budget.Add(-1) >= 0 {
		if pace > 0 {
			next = next.Add(pace)
			if d := time.Until(next); d > 0 {
				select { // pacing to the configured rate, not a stand-in for a condition
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		k, addr := g.pick(rng)
		if retry >= 0 {
			k = retry
		}
		r.stats.sent.Add(1)
		start := time.Now().UnixNano()
		err := g.incr(addr, k)
		if !unreached(err) {
			g.noteOutage(k, start, time.Now().UnixNano(), err == nil)
		}
		// A client retries what failed, through another node as likely as not: a key's
		// outage then ends when its counter answers again, not when the generator happens
		// to pick the key again, which for one key among many can take seconds.
		retry = -1
		if g.failingSince[k].Load() != 0 {
			retry = k
		}
		switch classify(err) {
		case outcomeAcked:
			g.acked[k].Add(1)
			r.stats.acked.Add(1)
		case outcomeFailed:
			g.failed[k].Add(1)
			r.stats.failed.Add(1)
			g.noteErr(err)
		default:
			g.unknown[k].Add(1)
			r.stats.unknown.Add(1)
			g.noteErr(err)
		}
	}
}

// noteOutage tracks, per key, how long requests kept failing: from the start of the
// first request that failed to the answer of the next one that succeeded (work retries
// a failing key until one does), and the slowest answer that succeeded.
func (g *Gen) noteOutage(k int, start, end int64, ok bool) {
	if !ok {
		g.failingSince[k].CompareAndSwap(0, start)
		g.lastFailed[k].Store(start)
		return
	}
	storeMax(&g.slowest, end-start)
	if since := g.failingSince[k].Swap(0); since != 0 && end > since && storeMax(&g.longest, end-since) {
		g.longestFrom.Store(since)
		g.longestLastFail.Store(g.lastFailed[k].Load())
	}
}

// storeMax raises v to d if d is above it, and reports whether it did.
func storeMax(v *atomic.Int64, d int64) bool {
	for {
		cur := v.Load()
		if d <= cur {
			return false
		}
		if v.CompareAndSwap(cur, d) {
			return true
		}
	}
}

// unreached reports whether err says the request never reached a node (its port
// refused the connection: a node that is down, which clients of a real deployment
// leave): that says nothing of whether the counter could be counted through the others.
func unreached(err error) bool {
	var oerr *net.OpError
	return errors.As(err, &oerr) && oerr.Op == "dial"
}

// LongestOutage is the longest a key's requests kept failing, from the first failure
// to the answer of the request that then succeeded, over every run so far, through the
// nodes they reached: a request refused at the connection (unreached) is left out.
func (g *Gen) LongestOutage() time.Duration { return time.Duration(g.longest.Load()) }

// SlowestAnswer is the longest a request that succeeded waited for its answer (one
// held while its counter's owner changed, say).
func (g *Gen) SlowestAnswer() time.Duration { return time.Duration(g.slowest.Load()) }

// LongestUnanswered is the longest a client went without an answer for a key, retrying
// what failed: the longer of LongestOutage and SlowestAnswer.
func (g *Gen) LongestUnanswered() time.Duration { return max(g.LongestOutage(), g.SlowestAnswer()) }

// LongestOutageSpan is when the longest outage began and when its last failing
// request began (zero: none yet), to tell which moment of a fault it belongs to and how
// much of it is the wait for the key's next request.
func (g *Gen) LongestOutageSpan() (from, lastFail time.Time) {
	if ns := g.longestFrom.Load(); ns != 0 {
		return time.Unix(0, ns), time.Unix(0, g.longestLastFail.Load())
	}
	return time.Time{}, time.Time{}
}

var errNoAddr = errors.New("load: no node to send to")

func (g *Gen) incr(addr string, k int) error {
	if addr == "" {
		return errNoAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Timeout)
	defer cancel()
	n := g.inflightTo(addr)
	n.Add(1)
	defer n.Add(-1)
	return g.client(addr).Do(ctx, "SW.INCR", g.keys[k], g.cfg.Window, "BY", 1).Err()
}

func (g *Gen) inflightTo(addr string) *atomic.Int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.inflight[addr]
	if n == nil {
		n = new(atomic.Int64)
		g.inflight[addr] = n
	}
	return n
}

// WaitIdle waits (up to timeout) until no request to addr is in flight: after SetAddrs
// has taken addr out, the requests already sent there finish first. A test that is
// about to freeze or kill that node calls it, so only requests sent to the other nodes
// are judged.
func (g *Gen) WaitIdle(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for g.inflightTo(addr).Load() != 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("load: requests to %s still in flight after %v", addr, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// OutcomeUnknown is in the error a node answers for an op that was sent to its owner
// and not answered: it may or may not have counted.
const OutcomeUnknown = "outcome unknown"

type outcome int

const (
	outcomeAcked   outcome = iota
	outcomeFailed          // an error reply, or never sent
	outcomeUnknown         // sent, and no reply
)

// MayHaveCounted reports whether a request that failed with err may have counted
// nonetheless: it was sent and no decided answer came back (outcome unknown).
func MayHaveCounted(err error) bool { return err != nil && classify(err) == outcomeUnknown }

// classify tells what a request's error says about its fate.
func classify(err error) outcome {
	if err == nil {
		return outcomeAcked
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if strings.Contains(rerr.Error(), OutcomeUnknown) {
			return outcomeUnknown
		}
		return outcomeFailed
	}
	var oerr *net.OpError
	if errors.As(err, &oerr) && oerr.Op == "dial" {
		return outcomeFailed
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) || errors.Is(err, errNoAddr) {
		return outcomeFailed
	}
	return outcomeUnknown
}
