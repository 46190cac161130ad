package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// goResult is what Go handed its done.
type goResult struct {
	err error
	res []counter.Result
}

// startGo calls Go and returns where its outcome arrives.
func startGo(ctx context.Context, c *testClient, addr string, ops ...counter.Op) chan goResult {
	return startGoRequest(ctx, c, addr, fwd(ops...))
}

// startGoRequest is startGo for a whole Request.
func startGoRequest(ctx context.Context, c *testClient, addr string, req testRequest) chan goResult {
	ch := make(chan goResult, 2) // 2: a second call of done would show, not block
	res := make([]counter.Result, len(req.Ops))
	c.Go(ctx, addr, req, res, func(err error) { ch <- goResult{err, res} })
	return ch
}

// outcome waits for one outcome, and checks no second one comes.
func outcome(t *testing.T, ch chan goResult) goResult {
	t.Helper()
	var r goResult
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("done not called within 10s")
	}
	select {
	case again := <-ch:
		t.Fatalf("done called twice: %v, then %v", r.err, again.err)
	case <-time.After(20 * time.Millisecond):
	}
	return r
}

// Go's calls are answered like Do's, several in one frame when they come together.
func TestGoAnswers(t *testing.T) {
	o := startOwner(t, "")
	c := newTestClient(Config{})
	defer c.Close()
	var chans []chan goResult
	for range 20 {
		chans = append(chans, startGo(context.Background(), c, o.addr, incr("a", 1), incr("b", 2)))
	}
	seen := map[int64]bool{}
	for _, ch := range chans {
		r := outcome(t, ch)
		if r.err != nil || r.res[0].Err != nil {
			t.Fatalf("got %v %+v; want answered", r.err, r.res)
		}
		if seen[r.res[0].Count] || r.res[1].Count != 2*r.res[0].Count {
			t.Fatalf("counts %d, %d: each call must see its own increments", r.res[0].Count, r.res[1].Count)
		}
		seen[r.res[0].Count] = true
	}
	if got := o.local.Store.Count("a", spec10, t0); got != 20 {
		t.Fatalf("count: got %d; want 20", got)
	}
}

// A call of Go's that the peer does not answer in time ends with ErrTimeout at its
// deadline, and the late answer never lands in its results.
func TestGoTimesOut(t *testing.T) {
	o := startOwner(t, "")
	o.block = make(chan struct{})
	c := newTestClient(Config{Timeout: time.Minute})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := outcome(t, startGo(ctx, c, o.addr, incr("a", 1)))
	if !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("got %v; want ErrTimeout", r.err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v; the deadline is 100ms", d)
	}
	r.res[0].Count = -42 // the caller owns the slice again
	close(o.block)
	wait.ForTrue(t, 10*time.Second, func() bool { return o.local.Store.Count("a", spec10, t0) == 1 })
	if r := outcome(t, startGo(context.Background(), c, o.addr, incr("b", 1))); r.err != nil || r.res[0].Count != 1 {
		t.Fatalf("call after a timeout: got %v %+v; want count 1", r.err, r.res)
	}
	if r.res[0].Count != -42 {
		t.Fatalf("late answer wrote into a timed-out call's results: %+v", r.res[0])
	}
}

// A call of Go's that cannot be sent by its deadline (the dial hangs) ends unsent, and
// never goes out later; one to a peer that refuses connections ends unsent at once.
func TestGoUnsent(t *testing.T) {
	o := startOwner(t, "")
	dialing, release := make(chan struct{}, 1), make(chan struct{})
	c := newTestClient(Config{Dial: gatedDial(dialing, release), DialTimeout: time.Minute, Timeout: 100 * time.Millisecond})
	defer c.Close()
	r := outcome(t, startGo(context.Background(), c, o.addr, incr("a", 1)))
	if !errors.Is(r.err, ErrPeerUnreachable) {
		t.Fatalf("call queued past its deadline: got %v; want ErrPeerUnreachable (not sent)", r.err)
	}
	<-dialing
	close(release)
	if r := outcome(t, startGo(context.Background(), c, o.addr, incr("b", 1))); r.err != nil || r.res[0].Count != 1 {
		t.Fatalf("call after: got %v %+v; want count 1", r.err, r.res)
	}
	if got := o.local.Store.Count("a", spec10, t0); got != 0 {
		t.Fatalf("count of a: got %d; want 0 (never sent)", got)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	c2 := newTestClient(Config{})
	defer c2.Close()
	for i := range 2 { // the first dials and fails, the second finds the peer marked down
		if r := outcome(t, startGo(context.Background(), c2, closed, incr("a", 1))); !errors.Is(r.err, ErrPeerUnreachable) {
			t.Fatalf("call %d to a closed port: got %v; want ErrPeerUnreachable", i, r.err)
		}
	}
}

// While a frame waits for its answer, the next part-full one lingers: for more ops, and
// only until that answer comes, however long Linger is. Before, it waited out Linger.
func TestAnswerEndsTheLinger(t *testing.T) {
	o := startOwner(t, "")
	o.block = make(chan struct{})
	c := newTestClient(Config{Linger: time.Hour, Timeout: time.Hour})
	defer c.Close()
	first := startGo(context.Background(), c, o.addr, incr("a", 1))
	wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 })
	second := startGo(context.Background(), c, o.addr, incr("b", 1))
	third := startGo(context.Background(), c, o.addr, incr("c", 1))
	p, _ := c.peer(o.addr, false)
	wait.ForTrue(t, 10*time.Second, func() bool { return len(p.queue) == 0 }) // the writer holds them, lingering
	if got := o.frames.Load(); got != 1 {
		t.Fatalf("frames while the first waits: got %d; want 1", got)
	}
	close(o.block)
	for _, ch := range []chan goResult{first, second, third} {
		if r := outcome(t, ch); r.err != nil || r.res[0].Count != 1 {
			t.Fatalf("got %v %+v; want count 1", r.err, r.res)
		}
	}
	if got := o.frames.Load(); got != 2 {
		t.Fatalf("frames: got %d; want 2 (the two lingering calls in one)", got)
	}
}

// Once done is called its caller owns the ops again (counter.Decider's contract: the
// RESP loop clears its batch and fills it with the next). A call given up at its
// deadline while the writer was still encoding its ops let done run under the writer:
// under -race (make test) the detector failed this test, 3 runs in 3. done overwrites
// each op, as the loop's next batch does (the detector does not see clear's writes).
func TestGoDoneWaitsForTheEncoding(t *testing.T) {
	o := startOwner(t, "")
	c := newTestClient(Config{Timeout: time.Minute})
	defer c.Close()
	if r := outcome(t, startGo(context.Background(), c, o.addr, incr("warm", 1))); r.err != nil {
		t.Fatal(r.err) // dialed: the next call is claimed by the writer at once
	}
	key := strings.Repeat("k", 200)
	ops := make([]counter.Op, 100_000) // long enough to encode that the deadline passes meanwhile
	for i := range ops {
		ops[i] = incr(key, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	c.Go(ctx, o.addr, fwd(ops...), make([]counter.Result, len(ops)), func(err error) {
		for i := range ops {
			ops[i] = counter.Op{} // what the loop's answer does before the next batch
		}
		done <- err
	})
	select {
	case err := <-done:
		t.Logf("outcome: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("done was not called")
	}
}

// A frame the writer has buffered but not flushed cannot be answered: the next
// part-full frame must flush it before lingering for its answer. Before, the first
// call here was answered after the whole Linger (2 s).
func TestLingerFlushesTheFrameItWaitsFor(t *testing.T) {
	o := startOwner(t, "")
	dialing, release := make(chan struct{}, 1), make(chan struct{})
	c := newTestClient(Config{Dial: gatedDial(dialing, release), DialTimeout: time.Minute, Linger: 2 * time.Second, Timeout: time.Minute})
	defer c.Close()
	first := startGoRequest(context.Background(), c, o.addr, testRequest{Epoch: 7, Forwarded: true, Ops: []counter.Op{incr("a", 1)}})
	<-dialing // the writer holds the first call; the second queues behind it
	second := startGoRequest(context.Background(), c, o.addr, testRequest{Epoch: 8, Forwarded: true, Ops: []counter.Op{incr("b", 1)}})
	start := time.Now()
	close(release) // the second cannot join the first's frame (another epoch): it is held back
	if r := outcome(t, first); r.err != nil {
		t.Fatal(r.err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("first call answered after %v; want before the Linger (2s): its frame sat unflushed", d)
	}
	if r := outcome(t, second); r.err != nil {
		t.Fatal(r.err)
	}
}

// A call of Go's that finds its peer's queue full fails at once, unsent, instead of
// leaving a goroutine to wait for room: a slow peer must not grow goroutines without
// bound (before, each such call left one, until the peer closed). Half of them have a
// deadline already past, so their expiry races the failure: either way each done is
// called once.
func TestGoQueueFullFailsAtOnce(t *testing.T) {
	base := runtime.NumGoroutine()
	dialing := make(chan struct{}, 1)
	c := newTestClient(Config{Dial: gatedDial(dialing, nil), DialTimeout: time.Hour, Timeout: time.Minute})
	defer c.Close()
	p, _ := c.peer("x", true)
	const over = 1000
	n := 1 + cap(p.queue) + over
	calls := make([]atomic.Int32, n)
	errs := make([]error, n)
	start := func(i int, ctx context.Context) {
		c.Go(ctx, "x", fwd(incr("a", 1)), make([]counter.Result, 1), func(err error) {
			errs[i] = err
			calls[i].Add(1)
		})
	}
	start(0, context.Background())
	<-dialing // the writer holds the first call while it dials, for ever
	for i := 1; i <= cap(p.queue); i++ {
		start(i, context.Background())
	}
	if len(p.queue) != cap(p.queue) {
		t.Fatalf("queue holds %d calls; want it full (%d)", len(p.queue), cap(p.queue))
	}
	past := pastDeadline{context.Background(), time.Now().Add(-time.Second)}
	for i := n - over; i < n; i++ {
		if i%2 == 0 {
			start(i, past)
		} else {
			start(i, context.Background())
		}
	}
	// A call whose expiry won the race is handed its outcome on the timer's goroutine,
	// which may not have run yet: wait for every done before reading what it was given.
	wait.For(t, 5*time.Second, func() error {
		if g := runtime.NumGoroutine(); g > base+10 {
			return fmt.Errorf("%d goroutines after %d calls found the queue full; want at most %d", g, over, base+10)
		}
		for i := n - over; i < n; i++ {
			if calls[i].Load() == 0 {
				return fmt.Errorf("call %d past a full queue: done not called yet", i)
			}
		}
		return nil
	})
	for i := n - over; i < n; i++ {
		if got := calls[i].Load(); got != 1 || !errors.Is(errs[i], ErrPeerUnreachable) {
			t.Fatalf("call %d past a full queue: done called %d times, with %v; want once, ErrPeerUnreachable (not sent)", i, got, errs[i])
		}
		if i%2 == 1 && !strings.Contains(errs[i].Error(), "queue full") {
			t.Fatalf("call %d past a full queue: got %v; want it to say the queue is full", i, errs[i])
		}
	}
	c.Close()
	wait.For(t, 10*time.Second, func() error {
		for i := range calls {
			if calls[i].Load() == 0 {
				return fmt.Errorf("call %d: done not called after Close", i)
			}
		}
		if g := runtime.NumGoroutine(); g > base {
			return fmt.Errorf("%d goroutines after Close; want at most %d, as before", g, base)
		}
		return nil
	})
	for i := range calls {
		if got := calls[i].Load(); got != 1 {
			t.Fatalf("call %d: done called %d times; want once", i, got)
		}
	}
}
