package route

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/ring"
)

// later is a Forwarder that answers each call on a goroutine of its own once release
// is closed, as a peer's answer comes on an rpc connection's reader.
type later struct {
	recording
	release chan struct{}
	sent    atomic.Int32
}

func (f *later) Go(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result, done func(error)) {
	f.sent.Add(1)
	go func() {
		<-f.release
		done(f.Do(ctx, addr, epoch, ops, results))
	}()
}

// spreadOps are ops of every member of three, one invalid among them.
func spreadOps(rg *ring.Ring) []counter.Op {
	var ops []counter.Op
	for _, name := range []string{"n0", "n1", "n2", "n1"} {
		ops = append(ops, counter.Op{Kind: counter.Incr, Key: keyOwnedBy(rg, name), Window: 60_000, Buckets: 10, N: int64(len(ops) + 1)})
	}
	return append(ops, counter.Op{Kind: counter.Incr, Key: "", Window: 60_000, Buckets: 10, N: 1})
}

func threeMembers() ([]ring.Member, map[string]int) {
	var ms []ring.Member
	addrs := map[string]int{}
	for i := 0; i < 3; i++ {
		ms = append(ms, ring.Member{Name: fmt.Sprint("n", i), RPCAddr: fmt.Sprint("a", i)})
		addrs[fmt.Sprint("a", i)] = i
	}
	return ms, addrs
}

// checkAnswers checks that each op got its answer: a bad-input error for an invalid
// one, the local counter's count (N) for one n0 owns, the recording forwarder's for
// the others.
func checkAnswers(t *testing.T, rg *ring.Ring, addrs map[string]int, ops []counter.Op, res []counter.Result) {
	t.Helper()
	for i, op := range ops {
		if op.Key == "" {
			if !counter.IsBadInput(res[i].Err) {
				t.Fatalf("op %d (invalid): got %+v; want a bad-input error", i, res[i])
			}
			continue
		}
		m, _ := rg.Owner(op.Key)
		want := int64(addrs[m.RPCAddr])*1000 + op.N
		if m.Name == "n0" {
			want = op.N
		}
		if res[i].Err != nil || res[i].Count != want {
			t.Fatalf("op %d (owner %s): got %+v; want count %d", i, m.Name, res[i], want)
		}
	}
}

// A batch of several owners that all answer before Decide returns is decided at once:
// Decide reports true and never calls Done, as the Decider contract says (before, every
// such batch went to a goroutine and was reported later).
func TestSpreadAnsweredAtOnceIsDecidedAtOnce(t *testing.T) {
	ms, addrs := threeMembers()
	rg := ring.New(ms, ring.Config{})
	f := &recording{addrs: addrs}
	r := New("n0", &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}, f, counter.Limits{})
	r.SetRing(rg)
	ops := spreadOps(rg)
	res := make([]counter.Result, len(ops))
	var dones atomic.Int32
	if !r.Decide(context.Background(), &counter.Batch{Ops: ops, Results: res, Done: func() { dones.Add(1) }}) {
		t.Fatal("Decide reported a batch whose owners all answered at once as decided later")
	}
	if n := dones.Load(); n != 0 {
		t.Fatalf("Done called %d times for a batch decided at once; want 0", n)
	}
	checkAnswers(t, rg, addrs, ops, res)
	if f.calls != 2 {
		t.Fatalf("forwarded calls: got %d; want 2 (one per other owner)", f.calls)
	}
}

// A batch of several owners that answer later is reported later, and Done is called
// once, after the last owner answered, with every answer in its op's place.
func TestSpreadAnsweredLaterEndsOnce(t *testing.T) {
	ms, addrs := threeMembers()
	rg := ring.New(ms, ring.Config{})
	f := &later{recording: recording{addrs: addrs}, release: make(chan struct{})}
	r := New("n0", &counter.Local{Store: leaparray.NewStore(), Now: fixedClock(t0)}, f, counter.Limits{})
	r.SetRing(rg)
	ops := spreadOps(rg)
	res := make([]counter.Result, len(ops))
	var dones atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	done := make(chan struct{})
	if r.Decide(context.Background(), &counter.Batch{Ops: ops, Results: res, Done: func() {
		if dones.Add(1) == 1 {
			close(done)
		}
		wg.Done()
	}}) {
		t.Fatal("Decide reported a batch decided at once while its owners had not answered")
	}
	if f.sent.Load() != 2 {
		t.Fatalf("forwarded calls started: %d; want 2, both before Decide returned", f.sent.Load())
	}
	select {
	case <-done:
		t.Fatal("Done called before the owners answered")
	default:
	}
	close(f.release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not called within 10 s of the owners answering")
	}
	wg.Wait()
	if n := dones.Load(); n != 1 {
		t.Fatalf("Done called %d times; want 1", n)
	}
	checkAnswers(t, rg, addrs, ops, res)
}
