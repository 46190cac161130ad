package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
)

const t0 = 1_699_999_200_000

// owner is a real server deciding ops against a real store, counting the frames it got.
type owner struct {
	addr    string
	srv     *testServer
	local   *counter.Local
	frames  atomic.Int64
	budgets chan time.Duration // when non-nil, Handle sends each frame's Budget on it
	block   chan struct{}      // when non-nil, Handle waits on it (or for the test's end)
	done    chan struct{}      // closed when the test ends
}

func startOwner(t *testing.T, addr string, setup ...func(*testServer)) *owner {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{addr: ln.Addr().String(), local: &counter.Local{Store: leaparray.NewStore(), Now: func() int64 { return t0 }}}
	o.srv = newTestServer(testHandlerFunc(func(ctx context.Context, req *testRequest, res []counter.Result) {
		o.frames.Add(1)
		if o.budgets != nil {
			o.budgets <- req.Budget
		}
		if o.block != nil {
			select {
			case <-o.block:
			case <-o.done:
			}
		}
		if !req.Forwarded {
			panic("test sender always sets the hop mark")
		}
		o.local.DecideNow(req.Ops, res)
	}), nil)
	for _, f := range setup {
		f(o.srv)
	}
	o.done = make(chan struct{})
	go o.srv.Serve(ln)
	t.Cleanup(func() { close(o.done); o.srv.Close() })
	return o
}

func incr(key string, n int64) counter.Op {
	return counter.Op{Kind: counter.Incr, Key: key, Window: 60_000, Buckets: 10, N: n}
}

func fwd(ops ...counter.Op) testRequest { return testRequest{Epoch: 7, Forwarded: true, Ops: ops} }

func TestRoundTrip(t *testing.T) {
	o := startOwner(t, "")
	c := newTestClient(Config{})
	defer c.Close()
	ops := []counter.Op{
		incr("a", 3), incr("a", 2),
		{Kind: counter.Count, Key: "a", Window: 60_000, Buckets: 10},
		{Kind: counter.Allow, Key: "a", Window: 60_000, Buckets: 10, N: 10, Limit: 12},
		{Kind: counter.Reset, Key: "a", Window: 60_000, Buckets: 10},
		{Kind: counter.Incr, Key: "", Window: 60_000, Buckets: 10, N: 1}, // bad input
	}
	res := make([]counter.Result, len(ops))
	if err := c.Do(context.Background(), o.addr, fwd(ops...), res); err != nil {
		t.Fatal(err)
	}
	want := []counter.Result{{Count: 3}, {Count: 5}, {Count: 5}, {Count: 5, Remaining: 7, RetryAfterMs: 60_000}, {Existed: true}}
	for i, w := range want {
		if res[i] != w {
			t.Errorf("op %d: got %+v; want %+v", i, res[i], w)
		}
	}
	if !errors.Is(res[5].Err, counter.ErrBadArgument) || !counter.IsBadInput(res[5].Err) {
		t.Errorf("bad op: got %v; want a bad-input error", res[5].Err)
	}
}

func TestNotOwnerCrossesTheHop(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := newTestServer(testHandlerFunc(func(_ context.Context, req *testRequest, res []counter.Result) {
		for i := range res {
			res[i].Err = fmt.Errorf("%w: epoch %d", counter.ErrNotOwner, req.Epoch)
		}
	}), nil)
	go srv.Serve(ln)
	defer srv.Close()
	c := newTestClient(Config{})
	defer c.Close()
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), ln.Addr().String(), fwd(incr("a", 1)), res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, counter.ErrNotOwner) {
		t.Fatalf("got %v; want counter.ErrNotOwner", res[0].Err)
	}
}

// With a call in flight (held by the owner), later calls linger; their batch closes as
// soon as it is full, even with a long linger.
func TestBatchClosesWhenFull(t *testing.T) {
	o := startOwner(t, "")
	o.block = make(chan struct{})
	c := newTestClient(Config{MaxBatchOps: 8, Linger: time.Minute})
	defer c.Close()
	var wg sync.WaitGroup
	call := func() {
		defer wg.Done()
		res := make([]counter.Result, 1)
		if err := c.Do(context.Background(), o.addr, fwd(incr("k", 1)), res); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go call()
	wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 }) // the first call is in flight, held
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go call()
	}
	// Two frames in flight: the held one and the batch, which with a minute's linger can
	// only have gone out because it was full.
	wait.ForTrue(t, 10*time.Second, func() bool { return framesInFlight(c, o.addr) == 2 })
	close(o.block)
	wg.Wait()
	if got := o.frames.Load(); got != 2 {
		t.Fatalf("frames: got %d; want 2 (one call, then a full batch of 8)", got)
	}
	if got := o.local.Store.Count("k", leaparray.Spec{WindowMs: 60_000, Buckets: 10}, t0); got != 9 {
		t.Fatalf("count: got %d; want 9", got)
	}
}

// With a call in flight, a lone later call goes out after the linger.
func TestBatchClosesAfterLinger(t *testing.T) {
	o := startOwner(t, "")
	o.block = make(chan struct{})
	c := newTestClient(Config{MaxBatchOps: 100, Linger: 50 * time.Millisecond})
	defer c.Close()
	done := make(chan error, 2)
	go func() { done <- c.Do(context.Background(), o.addr, fwd(incr("k", 1)), make([]counter.Result, 1)) }()
	wait.ForTrue(t, 10*time.Second, func() bool { return o.frames.Load() == 1 })
	go func() { done <- c.Do(context.Background(), o.addr, fwd(incr("k", 1)), make([]counter.Result, 1)) }()
	wait.ForTrue(t, 10*time.Second, func() bool { return framesInFlight(c, o.addr) == 2 }) // sent after the linger
	close(o.block)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := o.frames.Load(); got != 2 {
		t.Fatalf("frames: got %d; want 2", got)
	}
}

func framesInFlight(c *testClient, addr string) int {
	p, _ := c.peer(addr, false)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	cn := p.conn
	p.mu.Unlock()
	if cn == nil {
		return 0
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.inflight)
}

func TestUnreachablePeerFailsFast(t *testing.T) {
	addr, free, err := freeport.Refused() // a closed listener's port may be taken by another test
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	c := newTestClient(Config{DownFor: time.Minute})
	defer c.Close()
	res := make([]counter.Result, 1)
	for i := 0; i < 3; i++ {
		err := c.Do(context.Background(), addr, fwd(incr("a", 1)), res)
		if !errors.Is(err, ErrPeerUnreachable) {
			t.Fatalf("call %d: got %v; want ErrPeerUnreachable", i, err)
		}
	}
}

// A peer that stops answering costs a caller at most the timeout, and its late answer
// never lands in a result slice the caller got back. The timeout neither drops the
// connection nor marks the peer down: the next call goes out at once on the same
// connection.
func TestTimeoutAndLateAnswer(t *testing.T) {
	o := startOwner(t, "")
	o.block = make(chan struct{})
	c := newTestClient(Config{Timeout: 100 * time.Millisecond})
	defer c.Close()
	res := make([]counter.Result, 1)
	start := time.Now()
	err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v; want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v; the deadline is 100ms", d)
	}
	before := currentConn(c, o.addr)
	res[0].Count = -42 // the caller owns the slice again
	close(o.block)     // the owner answers now, too late
	wait.ForTrue(t, 10*time.Second, func() bool { return o.local.Store.Count("a", leaparray.Spec{WindowMs: 60_000, Buckets: 10}, t0) == 1 })
	res2 := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("b", 1)), res2); err != nil || res2[0].Count != 1 {
		t.Fatalf("call after a timeout: got %v %+v; want count 1", err, res2[0])
	}
	if after := currentConn(c, o.addr); after == nil || after != before {
		t.Fatalf("connection after a timeout: got %p; want the same one, %p", after, before)
	}
	if res[0].Count != -42 {
		t.Fatalf("late answer wrote into an abandoned call's results: %+v", res[0])
	}
}

// currentConn is the peer's live connection (nil if none).
func currentConn(c *testClient, addr string) *conn[counter.Op, counter.Result] {
	p, _ := c.peer(addr, false)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn
}

// When the owner goes away, calls in flight fail; when it is back, calls work again.
func TestOwnerRestart(t *testing.T) {
	o := startOwner(t, "")
	addr := o.addr
	c := newTestClient(Config{DownFor: time.Millisecond})
	defer c.Close()
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), addr, fwd(incr("a", 1)), res); err != nil {
		t.Fatal(err)
	}
	o.srv.Close()
	// The first call may still go out on the old connection (and find it lost); after
	// that, dialing fails: the peer is unreachable.
	err := wait.Until(5*time.Second, func() error {
		err := c.Do(context.Background(), addr, fwd(incr("a", 1)), res)
		if errors.Is(err, ErrPeerUnreachable) {
			return nil
		}
		if err == nil || !errors.Is(err, ErrConnectionLost) {
			t.Fatalf("after the owner closed: got %v; want ErrConnectionLost or ErrPeerUnreachable", err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	startOwner(t, addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Do(context.Background(), addr, fwd(incr("a", 1)), res)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner back, calls still fail: %v", err)
		}
	}
}

// Garbage on a connection drops that connection only.
func TestMalformedFrameDropsConnection(t *testing.T) {
	o := startOwner(t, "")
	for _, junk := range [][]byte{
		{0, 0, 0, 0},                                    // zero length
		{0xff, 0xff, 0xff, 0xff},                        // over MaxFrameBytes
		{0, 0, 0, 3, frameRequest, 1},                   // truncated body
		{0, 0, 0, 2, frameResponse, 1},                  // wrong type
		{0, 0, 0, 6, frameRequest, 1, 0, 0, 0xff, 0xff}, // op count beyond the bytes left
		{0, 0, 0, 6, frameRequest, 1, 2, 0, 5, 0},       // a flag that does not exist
	} {
		nc, err := net.Dial("tcp", o.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(junk)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err == nil {
			t.Errorf("%x: the server answered garbage", junk)
		}
		nc.Close()
	}
	c := newTestClient(Config{})
	defer c.Close()
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil || res[0].Count != 1 {
		t.Fatalf("after garbage: got %v %+v; want count 1", err, res[0])
	}
}

// A request whose budget was spent before it was sent is not decided.
func TestExpiredRequestIsNotDecided(t *testing.T) {
	o := startOwner(t, "")
	nc, err := net.Dial("tcp", o.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := fwd(incr("late", 1))
	req.Budget = -time.Second
	nc.Write(appendRequestFrame(nil, 1, req))
	frame, err := newFrameReader(nc, frameStall).next(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]counter.Result, 1)
	if err := decodeAnswer(frame, res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, counter.ErrUnavailable) || !errors.Is(res[0].Err, counter.ErrExpired) {
		t.Fatalf("got %+v; want unavailable (expired)", res[0])
	}
	if got := o.local.Store.Count("late", leaparray.Spec{WindowMs: 60_000, Buckets: 10}, t0); got != 0 {
		t.Fatalf("an expired request was decided: count %d", got)
	}
}

// Frames answered in the connection's reader (SetInline) reuse its memory: each frame's
// handler still starts from zeroed results, and each answer is its own, however the
// frames before it were shaped.
func TestInlineFramesStartFresh(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(testHandlerFunc(func(_ context.Context, req *testRequest, res []counter.Result) {
		for i := range res {
			if res[i] != (counter.Result{}) {
				t.Errorf("op %d of %d: handler got %+v; want a zero result", i, len(res), res[i])
			}
			switch req.Ops[i].N {
			case 1:
				res[i] = counter.Result{Count: 7, Existed: true}
			case 2:
				res[i].Err = fmt.Errorf("%w: elsewhere", counter.ErrNotOwner)
			} // 3: left as it was
		}
	}), nil)
	srv.SetInline(func() bool { return true })
	go srv.Serve(ln)
	defer srv.Close()
	c := newTestClient(Config{MaxBatchOps: 1})
	defer c.Close()
	for _, sizes := range [][]int{{5, 1}, {2, 3}, {8, 8}, {1, 5}} {
		for _, n := range sizes {
			for _, kind := range []int64{1, 2, 3} {
				ops := make([]counter.Op, n)
				for i := range ops {
					ops[i] = incr(fmt.Sprint("k", i), kind)
				}
				res := make([]counter.Result, n)
				if err := c.Do(context.Background(), ln.Addr().String(), fwd(ops...), res); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					ok := map[int64]bool{1: r == counter.Result{Count: 7, Existed: true}, 2: errors.Is(r.Err, counter.ErrNotOwner),
						3: r == counter.Result{}}[kind]
					if !ok {
						t.Fatalf("%d ops of n=%d, op %d: got %+v", n, kind, i, r)
					}
				}
			}
		}
	}
}
