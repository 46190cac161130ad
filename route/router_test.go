package route

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rpc"
)

const t0 = 1_699_999_200_000

// testNode is a router with its own store and a real rpc server on loopback.
type testNode struct {
	name   string
	router *Router
	store  *leaparray.Store
	srv    *rpc.Server[counter.Op, counter.Result]
	addr   string
	client *peerrpc.Client
	frames atomic.Int64                  // forwarded requests this node's server handled
	hold   atomic.Pointer[chan struct{}] // when set, forwarded requests wait for it to close
}

// makeNodes starts n routers that share a clock and, unless told otherwise, one ring.
func makeNodes(t *testing.T, n int, now func() int64) ([]*testNode, []ring.Member) {
	t.Helper()
	nodes := make([]*testNode, n)
	members := make([]ring.Member, n)
	for i := range nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tn := &testNode{name: fmt.Sprint("n", i), store: leaparray.NewStore(), addr: ln.Addr().String(), client: peerrpc.NewClient(rpc.Config{})}
		local := &counter.Local{Store: tn.store, Now: now}
		tn.router = New(tn.name, local, peerrpc.Forwarder{C: tn.client}, counter.Limits{})
		tn.srv = rpc.NewServer(rpc.HandlerFunc[counter.Op, counter.Result](func(ctx context.Context, req *rpc.Request[counter.Op], res []counter.Result) {
			tn.frames.Add(1)
			if h := tn.hold.Load(); h != nil {
				<-*h
			}
			tn.router.Handle(context.Background(), req.Epoch, req.Ops, res)
		}), counter.Wire{}, nil)
		go tn.srv.Serve(ln)
		t.Cleanup(func() { tn.srv.Close(); tn.client.Close() })
		nodes[i] = tn
		members[i] = ring.Member{Name: tn.name, RPCAddr: tn.addr}
	}
	rg := ring.New(members, ring.Config{})
	for _, tn := range nodes {
		tn.router.SetRing(rg)
	}
	return nodes, members
}

func fixedClock(v int64) func() int64 { return func() int64 { return v } }

// ways are how a caller has a router decide ops: counter.Do (waiting), and
// counter.Start (an rpc reader's way), waited for. Tests of what a caller sees run both.
var ways = []struct {
	name string
	do   func(r *Router, ctx context.Context, ops []counter.Op, res []counter.Result)
}{
	{"Do", func(r *Router, ctx context.Context, ops []counter.Op, res []counter.Result) {
		counter.Do(ctx, r, ops, res)
	}},
	{"Start", startAndWait},
}

func startAndWait(r *Router, ctx context.Context, ops []counter.Op, res []counter.Result) {
	done := make(chan struct{})
	counter.Start(ctx, r, &counter.Batch{Ops: ops, Results: res, Done: func() { close(done) }})
	<-done
}

// The same random operations through random nodes of a 3-node cluster and against one
// local store give the same answers.
func TestClusterMatchesOneStore(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var now atomic.Int64
	now.Store(t0)
	clock := now.Load
	nodes, _ := makeNodes(t, 3, clock)
	ref := &counter.Local{Store: leaparray.NewStore(), Now: clock}
	kinds := []counter.Kind{counter.Incr, counter.Count, counter.Allow, counter.Reset}
	for i := 0; i < 3000; i++ {
		now.Add(rng.Int64N(300))
		batch := make([]counter.Op, 1+rng.IntN(8))
		for k := range batch {
			batch[k] = counter.Op{
				Kind: kinds[rng.IntN(len(kinds))], Key: fmt.Sprint("key-", rng.IntN(40)),
				Window: 10_000, Buckets: 10, N: 1 + rng.Int64N(3), Limit: rng.Int64N(30),
			}
			if rng.IntN(50) == 0 {
				batch[k].Key = "" // an invalid op among valid ones
			}
		}
		got := make([]counter.Result, len(batch))
		want := make([]counter.Result, len(batch))
		ways[rng.IntN(len(ways))].do(nodes[rng.IntN(len(nodes))].router, context.Background(), batch, got)
		ref.DecideNow(batch, want)
		for k := range batch {
			if (got[k].Err == nil) != (want[k].Err == nil) || (got[k].Err == nil && got[k] != want[k]) {
				t.Fatalf("batch %d op %d %+v (seed %d): got %+v; want %+v", i, k, batch[k], seed, got[k], want[k])
			}
		}
	}
	// The counters really are spread: every node holds some.
	for _, tn := range nodes {
		if tn.store.Len() == 0 {
			t.Errorf("%s holds no counter", tn.name)
		}
	}
}

// Concurrent allow calls through every node admit exactly the limit.
func TestConcurrentAllowAdmitsExactlyLimit(t *testing.T) {
	nodes, _ := makeNodes(t, 3, fixedClock(t0))
	const limit = 500
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func(tn *testNode) {
			defer wg.Done()
			op := []counter.Op{{Kind: counter.Allow, Key: "hot", Window: 60_000, Buckets: 10, N: 1, Limit: limit}}
			res := make([]counter.Result, 1)
			for i := 0; i < 100; i++ {
				counter.Do(context.Background(), tn.router, op, res)
				if res[0].Err != nil {
					t.Error(res[0].Err)
					return
				}
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		}(nodes[w%3])
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Fatalf("admitted %d; want %d", got, limit)
	}
}

// Two nodes that each think the other owns a key never bounce it: the receiver answers
// "not owner", and the sender, whose ring has not changed, fails the op.
func TestNoBounceBetweenDisagreeingNodes(t *testing.T) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	key := ""
	full := ring.New(members, ring.Config{})
	for i := 0; ; i++ {
		if m, _ := full.Owner(fmt.Sprint("k", i)); m.Name == "n1" {
			key = fmt.Sprint("k", i)
			break
		}
	}
	// n1 believes n0 owns everything (a ring of n0 alone); n0 believes n1 owns key.
	nodes[1].router.SetRing(ring.New(members[:1], ring.Config{}))
	nodes[0].router.RetryWait = 100 * time.Millisecond
	res := make([]counter.Result, 1)
	counter.Do(context.Background(), nodes[0].router, []counter.Op{{Kind: counter.Incr, Key: key, Window: 1000, Buckets: 10, N: 1}}, res)
	if !errors.Is(res[0].Err, counter.ErrUnavailable) {
		t.Fatalf("got %+v; want ErrUnavailable (ownership moving)", res[0])
	}
	if nodes[0].store.Len()+nodes[1].store.Len() != 0 {
		t.Fatalf("a counter was created by a bounced op")
	}
	// Once the rings agree again, the op succeeds.
	nodes[1].router.SetRing(full)
	counter.Do(context.Background(), nodes[0].router, []counter.Op{{Kind: counter.Incr, Key: key, Window: 1000, Buckets: 10, N: 1}}, res)
	if res[0].Err != nil || res[0].Count != 1 {
		t.Fatalf("after the rings agree: got %+v; want count 1", res[0])
	}
}

// An op answered "not owner" waits for this node's ring to change and then goes to the
// new owner: a membership change costs the client latency, not an error.
func TestNotOwnerWaitsForTheNewRing(t *testing.T) {
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) { testNotOwnerWaitsForTheNewRing(t, way.do) })
	}
}

func testNotOwnerWaitsForTheNewRing(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result)) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	full := ring.New(members, ring.Config{})
	key := keyOwnedBy(full, "n1")
	// n1 has already seen itself leave (a ring of n0 alone); n0 has not yet.
	onlyN0 := ring.New(members[:1], ring.Config{})
	nodes[1].router.SetRing(onlyN0)
	done := make(chan counter.Result, 1)
	go func() {
		res := make([]counter.Result, 1)
		do(nodes[0].router, context.Background(), []counter.Op{{Kind: counter.Incr, Key: key, Window: 1000, Buckets: 10, N: 1}}, res)
		done <- res[0]
	}()
	// n1 has answered "not owner"; n0 learns of the change while the op waits.
	if err := wait.Until(5*time.Second, func() error {
		if nodes[1].frames.Load() == 0 {
			return wait.ErrNotYet
		}
		return nil
	}); err != nil {
		t.Fatal("n1 never saw the forwarded op")
	}
	select {
	case r := <-done:
		t.Fatalf("the op finished before the ring changed: %+v", r)
	default:
	}
	nodes[0].router.SetRing(onlyN0)
	r := <-done
	if r.Err != nil || r.Count != 1 {
		t.Fatalf("got %+v; want count 1, decided by n0", r)
	}
	if got := nodes[0].store.Count(key, leaparray.Spec{WindowMs: 1000, Buckets: 10}, t0); got != 1 {
		t.Fatalf("n0's store: got %d; want 1", got)
	}
}

// An owner that cannot be reached makes its ops fail with ErrUnavailable, quickly, and
// leaves the other ops of the batch decided.
func TestUnreachableOwner(t *testing.T) {
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) { testUnreachableOwner(t, way.do) })
	}
}

func testUnreachableOwner(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result)) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	nodes[1].srv.Close()
	// n1's port, now closed, might be taken by another test's server: n1 moves to an
	// address that stays refused.
	addr, free, err := freeport.Refused()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(free)
	members[1].RPCAddr = addr
	nodes[0].router.SetRing(ring.New(members, ring.Config{}))
	ops := make([]counter.Op, 20)
	for i := range ops {
		ops[i] = counter.Op{Kind: counter.Incr, Key: fmt.Sprint("k", i), Window: 1000, Buckets: 10, N: 1}
	}
	res := make([]counter.Result, len(ops))
	start := time.Now()
	do(nodes[0].router, context.Background(), ops, res)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	ok, failed := 0, 0
	for _, r := range res {
		switch {
		case r.Err == nil && r.Count == 1:
			ok++
		case errors.Is(r.Err, counter.ErrUnavailable):
			failed++
		default:
			t.Fatalf("unexpected result %+v", r)
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("ok %d, failed %d; want both (keys spread over both nodes)", ok, failed)
	}
}

func TestNoRingYet(t *testing.T) {
	r := New("n0", &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}, peerrpc.Forwarder{C: peerrpc.NewClient(rpc.Config{})}, counter.Limits{})
	res := make([]counter.Result, 2)
	counter.Do(context.Background(), r, []counter.Op{{Kind: counter.Incr, Key: "a", Window: 1000, Buckets: 10, N: 1}, {Kind: counter.Incr}}, res)
	if !errors.Is(res[0].Err, counter.ErrUnavailable) || !counter.IsBadInput(res[1].Err) {
		t.Fatalf("got %v, %v; want unavailable, bad input", res[0].Err, res[1].Err)
	}
}

// When neither the owner nor a fallback can decide, allow answers as FailOpen says and
// the other ops fail.
func TestFailPolicyWhenOwnerAndFallbackAreGone(t *testing.T) {
	for _, way := range ways {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail-open=%v", way.name, open), func(t *testing.T) { testFailPolicy(t, way.do, open) })
		}
	}
}

func testFailPolicy(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result), open bool) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	rg := ring.New(members, ring.Config{})
	key := keyOwnedBy(rg, "n1")
	nodes[1].srv.Close()
	r := nodes[0].router
	r.RetryWait = 50 * time.Millisecond
	r.FailOpen = open
	ops := []counter.Op{
		{Kind: counter.Allow, Key: key, Window: 10_000, Buckets: 10, N: 1, Limit: 5},
		{Kind: counter.Count, Key: key, Window: 10_000, Buckets: 10},
	}
	res := make([]counter.Result, 2)
	do(r, context.Background(), ops, res)
	wantPolicyAnswer(t, r, res[0], open, counter.ErrUnavailable)
	if !errors.Is(res[1].Err, counter.ErrUnavailable) {
		t.Errorf("fail-open %v: count got %+v; want unavailable", open, res[1])
	}
}

// wantPolicyAnswer checks that res, the first answer r gave, is the fail policy's to an
// allow of limit 5 over 10 buckets of a second, not decided for cause: marked, its
// count and remaining unknown, and counted in r's metric.
func wantPolicyAnswer(t *testing.T, r *Router, res counter.Result, open bool, cause error) {
	t.Helper()
	want := counter.Result{Count: -1, Remaining: -1, RetryAfterMs: 1000} // denied: ask again after a bucket
	wantOpen, wantClosed := uint64(0), uint64(1)
	if open {
		want = counter.Result{Allowed: true, Count: -1, Remaining: -1}
		wantOpen, wantClosed = 1, 0
	}
	if !errors.Is(res.Undecided, cause) {
		t.Errorf("fail-open %v: allow got Undecided %v; want one wrapping %v", open, res.Undecided, cause)
	}
	if res.Undecided = nil; res != want {
		t.Errorf("fail-open %v: allow got %+v; want %+v", open, res, want)
	}
	if o, c := r.FailPolicyAnswers(); o != wantOpen || c != wantClosed {
		t.Errorf("fail-open %v: FailPolicyAnswers %d open, %d closed; want %d, %d", open, o, c, wantOpen, wantClosed)
	}
}

// An allow whose answer from its owner was lost is answered by the fail policy, marked
// as such: the owner may have admitted it.
func TestLostAllowAnswerGetsFailPolicy(t *testing.T) {
	for _, way := range ways {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail-open=%v", way.name, open), func(t *testing.T) { testLostAllowAnswer(t, way.do, open) })
		}
	}
}

func testLostAllowAnswer(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result), open bool) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	key := keyOwnedBy(ring.New(members, ring.Config{}), "n1")
	hold := make(chan struct{})
	defer close(hold)
	nodes[1].hold.Store(&hold)
	r := nodes[0].router
	r.FailOpen = open
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := make([]counter.Result, 1)
	do(r, ctx, []counter.Op{{Kind: counter.Allow, Key: key, Window: 10_000, Buckets: 10, N: 1, Limit: 5}}, res)
	wantPolicyAnswer(t, r, res[0], open, counter.ErrOutcomeUnknown)
}

// An op sent to its owner whose answer comes too late has an unknown outcome: the
// caller is told so, and it is never decided anywhere else (which could count it
// twice); the owner, which did decide it, counts it once.
func TestLateAnswerIsOutcomeUnknown(t *testing.T) {
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) { testLateAnswerIsOutcomeUnknown(t, way.do) })
	}
}

func testLateAnswerIsOutcomeUnknown(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result)) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	rg := ring.New(members, ring.Config{})
	key := keyOwnedBy(rg, "n1")
	hold := make(chan struct{})
	nodes[1].hold.Store(&hold)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := make([]counter.Result, 1)
	op := counter.Op{Kind: counter.Incr, Key: key, Window: 10_000, Buckets: 10, N: 1}
	do(nodes[0].router, ctx, []counter.Op{op}, res)
	if !errors.Is(res[0].Err, counter.ErrOutcomeUnknown) {
		t.Fatalf("late answer: got %+v; want ErrOutcomeUnknown", res[0])
	}
	close(hold)
	sp := leaparray.Spec{WindowMs: 10_000, Buckets: 10}
	if err := wait.Until(5*time.Second, func() error {
		if got := nodes[1].store.Count(key, sp, t0); got != 1 {
			return fmt.Errorf("owner counts %d", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("the owner never decided the op: %v", err)
	}
	if got := nodes[0].store.Count(key, sp, t0); got != 0 {
		t.Fatalf("the sender decided it too: %d", got)
	}
}

// keyOwnedBy is the first key k<i> that rg gives to the member named name.
func keyOwnedBy(rg *ring.Ring, name string) string {
	for i := 0; ; i++ {
		if m, _ := rg.Owner(fmt.Sprint("k", i)); m.Name == name {
			return fmt.Sprint("k", i)
		}
	}
}

// A count whose answer was lost is asked again (asking changes nothing), where an incr's
// lost answer stays outcome unknown. Before, the count failed as outcome unknown too.
func TestLostCountIsAskedAgain(t *testing.T) {
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) { testLostCountIsAskedAgain(t, way.do) })
	}
}

func testLostCountIsAskedAgain(t *testing.T, do func(*Router, context.Context, []counter.Op, []counter.Result)) {
	nodes, members := makeNodes(t, 2, fixedClock(t0))
	key := keyOwnedBy(ring.New(members, ring.Config{}), "n1")
	sp := leaparray.Spec{WindowMs: 10_000, Buckets: 10}
	if _, err := nodes[1].store.TryIncr(key, sp, 3, t0); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer close(hold)
	nodes[1].hold.Store(&hold)
	go func() { // only the first frame is held: its answer comes after the rpc timeout
		wait.Until(10*time.Second, func() error {
			if nodes[1].frames.Load() == 0 {
				return errors.New("no frame yet")
			}
			return nil
		})
		nodes[1].hold.Store(nil)
	}()
	res := make([]counter.Result, 1)
	do(nodes[0].router, context.Background(), []counter.Op{{Kind: counter.Count, Key: key, Window: 10_000, Buckets: 10}}, res)
	if res[0].Err != nil || res[0].Count != 3 {
		t.Fatalf("count: got %+v; want 3", res[0])
	}
	if got := nodes[1].frames.Load(); got < 2 {
		t.Fatalf("frames at the owner: got %d; want 2 or more (asked again)", got)
	}
}
