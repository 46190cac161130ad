package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
)

var spec10 = leaparray.Spec{WindowMs: 60_000, Buckets: 10}

// goDo starts c.Do in a goroutine; its error and results arrive on the channel.
func goDo(ctx context.Context, c *testClient, addr string, ops ...counter.Op) chan doResult {
	ch := make(chan doResult, 1)
	go func() {
		res := make([]counter.Result, len(ops))
		err := c.Do(ctx, addr, fwd(ops...), res)
		ch <- doResult{err, res}
	}()
	return ch
}

type doResult struct {
	err error
	res []counter.Result
}

// One caller's cancel ends its own call only: the other call on the connection (in
// another frame, or in the same one) still gets its answer, on the same connection,
// and the peer is not marked down.
func TestCancelAffectsOnlyItsCall(t *testing.T) {
	for _, sameFrame := range []bool{false, true} {
		t.Run(fmt.Sprint("sameFrame=", sameFrame), func(t *testing.T) {
			o := startOwner(t, "")
			o.block = make(chan struct{})
			cfg := Config{MaxBatchOps: 2, Linger: -1, Timeout: 10 * time.Second}
			if sameFrame {
				cfg.Linger = time.Minute
			}
			c := newTestClient(cfg)
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var held chan doResult
			var a, b chan doResult
			if sameFrame {
				// A call held by the owner makes the connection busy: the next two
				// calls linger and go out together, in one full frame.
				held = goDo(context.Background(), c, o.addr, incr("h", 1))
				wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 })
				a = goDo(ctx, c, o.addr, incr("a", 1))
				b = goDo(context.Background(), c, o.addr, incr("b", 1))
				wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 2 })
			} else {
				a = goDo(ctx, c, o.addr, incr("a", 1))
				wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 })
				b = goDo(context.Background(), c, o.addr, incr("b", 1))
				wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 2 })
			}
			before := currentConn(c, o.addr)
			cancel()
			r := <-a
			if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, ErrPeerUnreachable) {
				t.Fatalf("cancelled call: got %v; want context.Canceled, sent (not ErrPeerUnreachable)", r.err)
			}
			select {
			case r := <-b:
				t.Fatalf("the other call ended with the cancelled one: %v", r.err)
			default:
			}
			close(o.block)
			if r := <-b; r.err != nil || r.res[0].Count != 1 {
				t.Fatalf("other call: got %v %+v; want count 1", r.err, r.res)
			}
			if held != nil {
				if r := <-held; r.err != nil {
					t.Fatalf("held call: %v", r.err)
				}
			}
			if after := currentConn(c, o.addr); after != before {
				t.Fatalf("connection after a cancel: got %p; want the same, %p", after, before)
			}
			res := make([]counter.Result, 1)
			if err := c.Do(context.Background(), o.addr, fwd(incr("c", 1)), res); err != nil {
				t.Fatalf("call after a cancel: %v (the peer must not be marked down)", err)
			}
		})
	}
}

// gatedDial dials TCP once release is closed, telling dialing when it starts.
func gatedDial(dialing chan<- struct{}, release <-chan struct{}) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		dialing <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// Calls given up while still queued (one taken by the writer, which is dialing; one
// behind it) are never sent, and their callers learn so (ErrPeerUnreachable).
func TestAbandonedQueuedCallIsNotSent(t *testing.T) {
	o := startOwner(t, "")
	dialing, release := make(chan struct{}, 1), make(chan struct{})
	c := newTestClient(Config{Dial: gatedDial(dialing, release), DialTimeout: time.Minute, Timeout: time.Minute})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	a := goDo(ctx, c, o.addr, incr("a", 1))
	<-dialing
	b := goDo(ctx, c, o.addr, incr("b", 1))
	p, _ := c.peer(o.addr, false)
	wait.ForTrue(t, 10*time.Second, func() bool { return len(p.queue) == 1 })
	cancel()
	for _, ch := range []chan doResult{a, b} {
		if r := <-ch; !errors.Is(r.err, ErrPeerUnreachable) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("call given up while queued: got %v; want ErrPeerUnreachable (not sent), context.Canceled", r.err)
		}
	}
	close(release)
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("c", 1)), res); err != nil || res[0].Count != 1 {
		t.Fatalf("call after: got %v %+v; want count 1", err, res[0])
	}
	if got := c.Stats().Frames; got != 1 {
		t.Fatalf("frames sent: got %d; want 1 (only the last call's)", got)
	}
	for _, k := range []string{"a", "b"} {
		if got := o.local.Store.Count(k, spec10, t0); got != 0 {
			t.Fatalf("count of %q: got %d; want 0 (given up before it was sent)", k, got)
		}
	}
}

// The budget written in a frame is the time left, when it is written, until its
// callers' earliest deadline: each caller's context deadline, bounded by Config.Timeout.
func TestFrameBudgetIsCallersTimeLeft(t *testing.T) {
	o := startOwner(t, "")
	o.budgets = make(chan time.Duration, 10)
	// within checks a budget written between start and end for a deadline at d.
	within := func(t *testing.T, got time.Duration, d, start, end time.Time) {
		t.Helper()
		if lo, hi := d.Sub(end)-time.Millisecond, d.Sub(start); got < lo || got > hi {
			t.Fatalf("frame budget: got %v; want the time left to %v when written, in [%v, %v]", got, d, lo, hi)
		}
	}
	t.Run("caller's deadline", func(t *testing.T) {
		c := newTestClient(Config{Timeout: time.Minute})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		d, _ := ctx.Deadline()
		start := time.Now()
		if err := c.Do(ctx, o.addr, fwd(incr("a", 1)), make([]counter.Result, 1)); err != nil {
			t.Fatal(err)
		}
		within(t, <-o.budgets, d, start, time.Now())
	})
	t.Run("bounded by Timeout", func(t *testing.T) {
		c := newTestClient(Config{Timeout: 2 * time.Second})
		defer c.Close()
		start := time.Now()
		if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), make([]counter.Result, 1)); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if got := <-o.budgets; got < 2*time.Second-end.Sub(start)-time.Millisecond || got > 2*time.Second {
			t.Fatalf("frame budget: got %v; want Timeout less the time to write it, in [%v, 2s]", got, 2*time.Second-end.Sub(start)-time.Millisecond)
		}
	})
	t.Run("earliest of a batch", func(t *testing.T) {
		o.block = make(chan struct{})
		defer func() { o.block = nil }()
		c := newTestClient(Config{MaxBatchOps: 2, Linger: time.Minute, Timeout: time.Minute})
		defer c.Close()
		held := goDo(context.Background(), c, o.addr, incr("h", 1)) // makes the next two batch up
		<-o.budgets
		ctxLate, cancelLate := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancelLate()
		ctxEarly, cancelEarly := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancelEarly()
		early, _ := ctxEarly.Deadline()
		start := time.Now()
		a := goDo(ctxLate, c, o.addr, incr("a", 1))
		b := goDo(ctxEarly, c, o.addr, incr("b", 1))
		got := <-o.budgets
		end := time.Now()
		close(o.block)
		for _, ch := range []chan doResult{held, a, b} {
			if r := <-ch; r.err != nil {
				t.Fatal(r.err)
			}
		}
		within(t, got, early, start, end)
	})
}

// MarkDown makes calls fail at once, unsent, even with a live connection, until it
// passes or is cleared.
func TestMarkDown(t *testing.T) {
	o := startOwner(t, "", echoHeartbeats)
	c := newTestClient(Config{})
	defer c.Close()
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil {
		t.Fatal(err)
	}
	c.MarkDown(o.addr, time.Now().Add(time.Minute))
	for i := 0; i < 3; i++ {
		if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); !errors.Is(err, ErrPeerUnreachable) {
			t.Fatalf("call %d while marked down: got %v; want ErrPeerUnreachable", i, err)
		}
	}
	if got := c.Stats().Frames; got != 1 {
		t.Fatalf("frames sent: got %d; want 1 (none while marked down)", got)
	}
	// Heartbeats still go: they are how a peer marked down is heard from again.
	if back, err := sendEcho(c, o.addr, KindHeartbeat, "7"); err != nil || back != "7" {
		t.Fatalf("heartbeat while marked down: got %q, %v; want 7 answered", back, err)
	}
	c.MarkDown(o.addr, time.Time{})
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil || res[0].Count != 2 {
		t.Fatalf("after clearing the mark: got %v %+v; want count 2", err, res[0])
	}
	c.MarkDown(o.addr, time.Now().Add(-time.Second)) // already over
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil {
		t.Fatalf("after a mark-down in the past: %v", err)
	}
	// A peer never called yet can be marked down too: it is not even dialed.
	var dials atomic.Int64
	c2 := newTestClient(Config{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}})
	defer c2.Close()
	c2.MarkDown(o.addr, time.Now().Add(time.Minute))
	if err := c2.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); !errors.Is(err, ErrPeerUnreachable) {
		t.Fatalf("new peer marked down: got %v; want ErrPeerUnreachable", err)
	}
	if got := dials.Load(); got != 0 {
		t.Fatalf("dials to a peer marked down: got %d; want 0", got)
	}
}

// pipeNet is an in-process network: Dial hands the server one end of a net.Pipe.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	dials  atomic.Int64
}

func newPipeNet() *pipeNet { return &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})} }

func (n *pipeNet) Dial(ctx context.Context, _ string) (net.Conn, error) {
	n.dials.Add(1)
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		return client, nil
	case <-n.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.closed:
		return nil, net.ErrClosed
	}
}

func (n *pipeNet) Close() error   { n.once.Do(func() { close(n.closed) }); return nil }
func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Config.Dial carries calls over an in-process network; one connection serves them all.
func TestDialIsInjectable(t *testing.T) {
	pn := newPipeNet()
	local := &counter.Local{Store: leaparray.NewStore(), Now: func() int64 { return t0 }}
	srv := newTestServer(testHandlerFunc(func(ctx context.Context, req *testRequest, res []counter.Result) { local.DecideNow(req.Ops, res) }), nil)
	go srv.Serve(pn)
	defer srv.Close()
	c := newTestClient(Config{Dial: pn.Dial})
	defer c.Close()
	res := make([]counter.Result, 1)
	for i := int64(1); i <= 3; i++ {
		if err := c.Do(context.Background(), "node-1", fwd(incr("a", 1)), res); err != nil || res[0].Count != i {
			t.Fatalf("call %d: got %v %+v; want count %d", i, err, res[0], i)
		}
	}
	if got := pn.dials.Load(); got != 1 {
		t.Fatalf("dials: got %d; want 1", got)
	}
}

// A failed dial marks the peer down for DownFor: the calls meanwhile do not dial.
func TestFailedDialMarksDown(t *testing.T) {
	var dials atomic.Int64
	c := newTestClient(Config{DownFor: time.Minute, Dial: func(context.Context, string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("refused")
	}})
	defer c.Close()
	for i := 0; i < 3; i++ {
		if err := c.Do(context.Background(), "x", fwd(incr("a", 1)), make([]counter.Result, 1)); !errors.Is(err, ErrPeerUnreachable) {
			t.Fatalf("call %d: got %v; want ErrPeerUnreachable", i, err)
		}
	}
	if got := dials.Load(); got != 1 {
		t.Fatalf("dials: got %d; want 1", got)
	}
}

// The peer's lock is not held while dialing: Forget (and anything else that takes
// it) does not wait for a dial, and ends it.
func TestDialOutsidePeerLock(t *testing.T) {
	dialing := make(chan struct{}, 1)
	c := newTestClient(Config{Dial: gatedDial(dialing, nil), DialTimeout: time.Minute, Timeout: time.Minute})
	defer c.Close()
	a := goDo(context.Background(), c, "x", incr("a", 1))
	<-dialing
	done := make(chan struct{})
	go func() {
		currentConn(c, "x") // takes the peer's lock
		c.Forget("x")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Forget waited for a dial in progress")
	}
	if r := <-a; !errors.Is(r.err, ErrClosed) {
		t.Fatalf("call whose peer was forgotten while dialing: got %v; want ErrClosed", r.err)
	}
}

// Forget releases everything of the peer: its writer, reader and connection (and the
// server's goroutine for it), even with calls queued and in flight, which fail.
func TestForgetReleasesGoroutines(t *testing.T) {
	o := startOwner(t, "")
	base := runtime.NumGoroutine()
	o.block = make(chan struct{})
	c := newTestClient(Config{MaxBatchOps: 1, Timeout: time.Minute})
	defer c.Close()
	calls := []chan doResult{goDo(context.Background(), c, o.addr, incr("a", 1))}
	wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 })
	p, _ := c.peer(o.addr, false)
	for i := 0; i < 50; i++ {
		calls = append(calls, goDo(context.Background(), c, o.addr, incr("a", 1)))
	}
	// Every call has reached the peer (queued, or sent and held by the owner) before
	// it is forgotten; a call made after would start a new one.
	wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load()+int64(len(p.queue)) == 51 })
	c.Forget(o.addr)
	for _, ch := range calls {
		if r := <-ch; !errors.Is(r.err, ErrClosed) {
			t.Fatalf("call to a forgotten peer: got %v; want ErrClosed", r.err)
		}
	}
	close(o.block)
	wait.For(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines; want at most %d, as before the calls", n, base)
		}
		return nil
	})
}

// Forget, racing with calls being queued and sent, leaves nothing behind: in
// particular no connection dialed for a call taken from the queue after it.
func TestForgetWhileCalling(t *testing.T) {
	o := startOwner(t, "")
	base := runtime.NumGoroutine()
	c := newTestClient(Config{MaxBatchOps: 1})
	defer c.Close()
	for round := 0; round < 50; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), make([]counter.Result, 1))
				if err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("call racing Forget: got %v; want nil or ErrClosed", err)
				}
			}()
		}
		c.Forget(o.addr)
		wg.Wait()
	}
	c.Forget(o.addr)
	wait.For(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines; want at most %d, as before the calls", n, base)
		}
		return nil
	})
}
