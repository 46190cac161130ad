package owner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// watchedRedis notes each call made while Owner.mu is held, and hands SendBatch's
// outcomes to the test instead of the owner.
type watchedRedis struct {
	Redis
	owner    atomic.Pointer[Owner]
	underMu  atomic.Int64
	outcomes chan func()
}

func (w *watchedRedis) check() {
	o := w.owner.Load()
	if o == nil {
		return
	}
	if !o.mu.TryLock() {
		w.underMu.Add(1)
		return
	}
	o.mu.Unlock()
}

func (w *watchedRedis) SendBatch(b Batch, done func(error)) {
	w.check()
	w.Redis.SendBatch(b, func(err error) { w.outcomes <- func() { done(err) } })
}

func (w *watchedRedis) StampWritten(n int, ps []int, now int64, epoch string, done func(string, error)) {
	w.check()
	w.Redis.StampWritten(n, ps, now, epoch, done)
}

func (w *watchedRedis) MarkLate(n int, ps []int, done func(error)) {
	w.check()
	w.Redis.MarkLate(n, ps, done)
}

// TestOutcomesNeverWaitForAStep: a call's outcome that comes while a step is under way
// is queued for the driver and returns at once (before: it waited on Owner.mu, and so
// did the rpc reader or lease goroutine it came on); it is applied once the step ends;
// and the owner makes no call while it holds mu. The owner ticks only when told.
func TestOutcomesNeverWaitForAStep(t *testing.T) {
	_, st := startRedis(t)
	w := &watchedRedis{outcomes: make(chan func(), 4)}
	n := &net{flush: time.Hour, wrap: func(r Redis) Redis { w.Redis = r; return w }}
	a := n.sole(t, "a", st)
	w.owner.Store(a.Owner)
	do(a.Owner, incr("k", 3))
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		a.flushOnce(context.Background())
	}()
	var deliver func()
	select {
	case deliver = <-w.outcomes:
	case <-time.After(10 * time.Second):
		t.Fatal("the write-behind was never sent")
	}

	// A step under way: posted, and held until released.
	release := holdStep(a.Owner)
	returned := make(chan struct{})
	go func() {
		deliver()
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("the write-behind's outcome waited for the step under way")
	}
	if a.flush.rounds.Load() != 0 {
		t.Fatal("the outcome was applied while another step held mu")
	}
	release()
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued outcome was never applied: the flush did not end")
	}
	if got := redisCount(t, st, "k"); got != 3 {
		t.Fatalf("Redis holds %d of k; want 3", got)
	}
	if c := w.underMu.Load(); c != 0 {
		t.Fatalf("%d Redis calls were made under Owner.mu; want none: a step asks, its end calls", c)
	}
}

// TestLapseTakesEffectBeforeItReturns: the lease keeper's report of a lapse returns
// only once the partition is stale, even while another step is under way (it waits for
// it): the keeper's next round may grant the lease again, and an op must not then find
// the partition held with its memory not yet stale. (A lapse posted without waiting
// let a count be decided from that memory: TestFencedCountersReloadOnlyOnceTheWriteApplied.)
func TestLapseTakesEffectBeforeItReturns(t *testing.T) {
	_, st := startRedis(t)
	logs := &messageCount{msg: "lease lapsed: these partitions are reloaded from Redis before they are decided again"}
	n := &net{flush: time.Hour, logs: logs}
	a := n.sole(t, "a", st)
	do(a.Owner, incr("k", 1))
	p := ringOf("a").Partition("k")
	release := holdStep(a.Owner)
	returned := make(chan struct{})
	go func() {
		a.lapse(p)
		close(returned)
	}()
	select {
	case <-returned:
		release()
		t.Fatal("Lapsed returned while another step held mu: its own step cannot have been taken")
	case <-time.After(200 * time.Millisecond): // (a bound on a wrong return, not a wait for one)
	}
	release()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Lapsed never returned")
	}
	if logs.n.Load() != 1 {
		t.Fatalf("Lapsed returned with partition %d (%v) not made stale", p, a.parts.get(p))
	}
}

// holdStep posts a step that holds o's mu until the function it returns is called.
func holdStep(o *Owner) (release func()) {
	inStep, end := make(chan struct{}), make(chan struct{})
	go o.post(func() {
		close(inStep)
		<-end
	})
	<-inStep
	return func() { close(end) }
}

// TestDoDrivesOnlyItsOwnStep: a goroutine that comes for its own step (the keeper's
// Lapsed, the membership's SetRing) returns once that step is taken, another goroutine
// taking the steps queued behind it (before: it drove them all, a step that waits
// included, and the keeper missed its heartbeats while it did).
func TestDoDrivesOnlyItsOwnStep(t *testing.T) {
	n := &net{flush: time.Hour}
	a := n.sole(t, "a", nil)
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	returned := make(chan struct{})
	go func() {
		a.do(func() {
			a.ask(func() { // queued behind this step, while this goroutine drives
				a.post(func() {
					close(started)
					<-release
				})
			})
		})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("do drove the step queued behind its own")
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the step queued behind was never taken")
	}
}

// TestFiguresReadRecordsWhileTheRingChanges: Unwritten (the metrics' figure) reads the
// Records without Owner.mu while the first ring makes them (a data race before: the
// table was a plain slice; -race finds it).
func TestFiguresReadRecordsWhileTheRingChanges(t *testing.T) {
	n := &net{flush: time.Hour}
	a := n.add(t, "a", nil)
	reading, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			a.Unwritten()
			if i == 0 {
				close(reading)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-reading
	a.SetRing(ringOf("a"))
	close(stop)
	<-done
	if a.parts.count() != ringOf("a").PartitionCount() {
		t.Fatalf("%d Records; want one a partition", a.parts.count())
	}
}
