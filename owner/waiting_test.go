package owner

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// waitingOwner is an owner of every partition of a one-node ring whose leases are not
// granted yet, with no ticks and waits of a minute: what waits stays parked until the
// test grants it.
func waitingOwner(t testing.TB) (*Owner, *fakeLeases, *ring.Ring) {
	fl := newFakeLeases()
	o := New(Config{Self: "a", Writer: "a.test", Store: leaparray.NewStore(), Leases: fl, Peers: PeersIO(discardSender{}),
		Now: func() int64 { return t0 }, HandoffWait: time.Minute})
	fl.onChange = o.LeasesChanged
	rg := ringOf("a")
	o.SetRing(rg)
	return o, fl, rg
}

// startOps starts one request per op on o and returns the channel each answers on.
func startOps(o *Owner, ops ...counter.Op) []chan counter.Result {
	chs := make([]chan counter.Result, len(ops))
	for i := range ops {
		ch := make(chan counter.Result, 1)
		b := &counter.Batch{Ops: ops[i : i+1], Results: make([]counter.Result, 1)}
		b.Done = func() { ch <- b.Results[0] }
		if o.Decide(context.Background(), b) {
			b.Done()
		}
		chs[i] = ch
	}
	return chs
}

// keysIn returns n keys of partition p of rg.
func keysIn(rg *ring.Ring, p, n int) []string {
	var ks []string
	for i := 0; len(ks) < n; i++ {
		if k := "k" + strconv.Itoa(i); rg.Partition(k) == p {
			ks = append(ks, k)
		}
	}
	return ks
}

// A partition takes at most maxParkedPerPartition waiting requests: one more is
// answered at once, unavailable ("moving") and not counted, while those waiting are
// decided once the lease comes.
func TestWaitingIsBoundedPerPartition(t *testing.T) {
	o, fl, rg := waitingOwner(t)
	p := rg.Partition("a-key")
	ks := keysIn(rg, p, 1)
	ops := make([]counter.Op, maxParkedPerPartition+1)
	for i := range ops {
		ops[i] = incr(ks[0], 1)
	}
	chs := startOps(o, ops...)
	select {
	case r := <-chs[len(chs)-1]:
		if !errors.Is(r.Err, counter.ErrUnavailable) || !strings.Contains(r.Err.Error(), "is moving") {
			t.Fatalf("the request past the bound: %v; want unavailable, ownership moving", r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the request past the bound waits too (%d parked)", o.parked())
	}
	if n := o.parked(); n != maxParkedPerPartition {
		t.Fatalf("%d requests wait; want %d", n, maxParkedPerPartition)
	}
	fl.grant(true, p)
	for i, ch := range chs[:len(chs)-1] {
		if r := <-ch; r.Err != nil {
			t.Fatalf("waiting request %d: %v", i, r.Err)
		}
	}
	mustCount(t, o, ks[0], maxParkedPerPartition)
}

// A wake that changes nothing for a partition costs one look at it, however many
// requests wait for it: before, every wake tried every waiting request again.
func TestAWakeJudgesPartitionsNotRequests(t *testing.T) {
	const waiting, wakes = 500, 50
	o, fl, rg := waitingOwner(t)
	p := rg.Partition("a-key")
	ks := keysIn(rg, p, waiting)
	ops := make([]counter.Op, waiting)
	for i := range ops {
		ops[i] = incr(ks[i], 1)
	}
	chs := startOps(o, ops...)
	if n := o.parked(); n != waiting {
		t.Fatalf("%d requests wait; want %d", n, waiting)
	}
	before := fl.asked.Load()
	for range wakes {
		o.LeasesChanged() // a heartbeat's answer that granted nothing new
	}
	if asked := fl.asked.Load() - before; asked > 2*wakes {
		t.Fatalf("%d wakes asked for leases %d times with %d requests waiting for one partition; want at most %d",
			wakes, asked, waiting, 2*wakes)
	}
	fl.grant(true, p)
	for i, ch := range chs {
		if r := <-ch; r.Err != nil || r.Count != 1 {
			t.Fatalf("request %d: %+v; want counted", i, r)
		}
	}
}

// Requests that find a ring change holding decide start no goroutine each: they are
// attempted once it lets go.
func TestRequestsDuringARingChangeStartNoGoroutines(t *testing.T) {
	const n = 2000
	o, fl, _ := waitingOwner(t)
	fl.grantAll()
	ops := make([]counter.Op, n)
	for i := range ops {
		ops[i] = incr("k"+strconv.Itoa(i), 1)
	}
	base := runtime.NumGoroutine()
	o.decide.Lock() // as a ring change does
	chs := startOps(o, ops...)
	if g := runtime.NumGoroutine(); g > base+n/10 {
		o.decide.Unlock()
		t.Fatalf("%d goroutines while %d requests wait for decide; %d before", g, n, base)
	}
	o.unlockDecide()
	wait.ForTrue(t, 10*time.Second, func() bool {
		for _, ch := range chs {
			if len(ch) == 0 {
				return false
			}
		}
		return true
	})
	for i, ch := range chs {
		if r := <-ch; r.Err != nil || r.Count != 1 {
			t.Fatalf("request %d: %+v; want counted", i, r)
		}
	}
}

// BenchmarkWaitThroughAMove parks 100,000 requests (one op each, on counters spread over
// every partition) on an owner whose leases are not granted yet, wakes it 20 times
// without a grant (heartbeat answers during a move), then grants every partition, and
// waits until every request is answered. It reports the CPU of the whole move per
// request, and the heap the parked requests held per request.
func BenchmarkWaitThroughAMove(b *testing.B) {
	const n, wakes = 100_000, 20
	ops := make([]counter.Op, n)
	for i := range ops {
		ops[i] = incr("move:"+strconv.Itoa(i), 1)
	}
	var cpu time.Duration
	var held uint64
	b.ReportAllocs()
	for range b.N {
		o, fl, _ := waitingOwner(b)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := processCPUTime()
		chs := startOps(o, ops...)
		runtime.ReadMemStats(&after)
		held += after.HeapAlloc - before.HeapAlloc
		if p := o.parked(); p != n {
			b.Fatalf("%d requests parked; want %d", p, n)
		}
		for range wakes {
			o.LeasesChanged()
		}
		fl.grantAll()
		for i, ch := range chs {
			if r := <-ch; r.Err != nil {
				b.Fatalf("request %d: %v", i, r.Err)
			}
		}
		cpu += processCPUTime() - start
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/request")
	b.ReportMetric(float64(held)/float64(b.N*n), "parked-B/request")
}

// processCPUTime is the CPU (user and system) this process has spent.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
