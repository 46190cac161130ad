package peerrpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/frametest"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/rpc"
)

const t0 = 1_699_999_200_000

// localOps decides forwarded ops in a store of its own.
type localOps struct{ local *counter.Local }

func (o localOps) Handle(_ context.Context, _ uint64, ops []counter.Op, results []counter.Result) {
	o.local.DecideNow(ops, results)
}

func (o localOps) HandleAsync(ctx context.Context, epoch uint64, ops []counter.Op, results []counter.Result, done func()) {
	o.Handle(ctx, epoch, ops, results)
	done()
}

// sink takes Handoffs, or refuses them with err.
type sink struct {
	mu  sync.Mutex
	got []*owner.Handoff
	err error
}

func (s *sink) Handoff(_ context.Context, h *owner.Handoff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.got = append(s.got, h)
	}
	return s.err
}

// serve starts a server on loopback and returns its address.
func serve(t *testing.T, recv owner.Receiver, beat func(*lease.Request) *lease.Reply) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(localOps{&counter.Local{Store: leaparray.NewStore(), Now: func() int64 { return t0 }}}, recv, beat, nil)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func incr(key string) []counter.Op {
	return []counter.Op{{Kind: counter.Incr, Key: key, Window: 60_000, Buckets: 10, N: 1}}
}

// Ops, Handoffs and heartbeats cross the transport on one connection, each in its own
// package's encoding, and the receiver's refusals reach the sender as owner's errors.
func TestOverTheTransport(t *testing.T) {
	recv := &sink{}
	addr := serve(t, recv, func(r *lease.Request) *lease.Reply { return &lease.Reply{Round: r.Round, Alive: r.Alive} })
	c := NewClient(rpc.Config{})
	defer c.Close()
	ctx := context.Background()
	h := &owner.Handoff{From: "n1", ID: 9, Partitions: []int{3},
		Counters: []owner.HandoffCounter{{Key: "k", Spec: leaparray.Spec{WindowMs: 60_000, Buckets: 10},
			Buckets: []leaparray.Bucket{{Index: 5, Count: 2}}}}}
	if err := (Handoffs{c}).Handoff(ctx, addr, h); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	if !reflect.DeepEqual(recv.got, []*owner.Handoff{h}) {
		t.Fatalf("received %+v; want %+v", recv.got, h)
	}
	recv.mu.Unlock()
	recv.mu.Lock()
	recv.err = fmt.Errorf("%w: partition 3 is n2's", owner.ErrHandoffNotOwner)
	recv.mu.Unlock()
	if err := (Handoffs{c}).Handoff(ctx, addr, h); !errors.Is(err, owner.ErrHandoffNotOwner) {
		t.Fatalf("refused handoff: got %v; want ErrHandoffNotOwner", err)
	}
	rep, err := Heartbeats{c}.Exchange(ctx, addr, &lease.Request{From: "n1", Round: 7, Alive: []string{"n1"}})
	if err != nil || rep.Round != 7 || !reflect.DeepEqual(rep.Alive, []string{"n1"}) {
		t.Fatalf("heartbeat: got %+v, %v; want round 7 and its members", rep, err)
	}
	res := make([]counter.Result, 1)
	if err := (Forwarder{c}).Do(ctx, addr, 1, incr("a"), res); err != nil || res[0].Count != 1 {
		t.Fatalf("ops: %v %+v", err, res[0])
	}
	if got := c.Stats().Frames; got != 4 {
		t.Fatalf("frames: got %d; want 4", got)
	}
}

// A node without a lease handler answers no reply; one without a receiver refuses
// Handoffs.
func TestNoHandlers(t *testing.T) {
	addr := serve(t, nil, nil)
	c := NewClient(rpc.Config{})
	defer c.Close()
	if _, err := (Heartbeats{c}).Exchange(context.Background(), addr, &lease.Request{From: "n1"}); !errors.Is(err, lease.ErrNoReply) {
		t.Fatalf("heartbeat: got %v; want lease.ErrNoReply", err)
	}
	h := &owner.Handoff{From: "n1", ID: 1}
	if err := (Handoffs{c}).Handoff(context.Background(), addr, h); !errors.Is(err, owner.ErrHandoffRefused) {
		t.Fatalf("handoff: got %v; want ErrHandoffRefused", err)
	}
}

// What rpc never sent reaches route and owner as counter.ErrNotSent (routed again, or
// sent again); a heartbeat still goes to a peer marked down.
func TestNotSent(t *testing.T) {
	addr := serve(t, &sink{}, func(r *lease.Request) *lease.Reply { return &lease.Reply{Round: r.Round} })
	c := NewClient(rpc.Config{})
	defer c.Close()
	ctx := context.Background()
	c.MarkDown(addr, time.Now().Add(time.Minute))
	res := make([]counter.Result, 1)
	if err := (Forwarder{c}).Do(ctx, addr, 1, incr("a"), res); !errors.Is(err, counter.ErrNotSent) {
		t.Fatalf("ops to a peer marked down: got %v; want counter.ErrNotSent", err)
	}
	done := make(chan error, 1)
	Forwarder{c}.Go(ctx, addr, 1, incr("a"), res, func(err error) { done <- err })
	if err := <-done; !errors.Is(err, counter.ErrNotSent) {
		t.Fatalf("ops sent with Go to a peer marked down: got %v; want counter.ErrNotSent", err)
	}
	if err := (Handoffs{c}).Handoff(ctx, addr, &owner.Handoff{From: "n1", ID: 1}); !errors.Is(err, counter.ErrNotSent) {
		t.Fatalf("handoff to a peer marked down: got %v; want counter.ErrNotSent", err)
	}
	if rep, err := (Heartbeats{c}).Exchange(ctx, addr, &lease.Request{Round: 3}); err != nil || rep.Round != 3 {
		t.Fatalf("heartbeat to a peer marked down: got %+v, %v; want it answered", rep, err)
	}
}

// A malformed Handoff or heartbeat drops the connection, like any malformed frame.
func TestMalformedMessagesDropTheConnection(t *testing.T) {
	addr := serve(t, &sink{}, func(r *lease.Request) *lease.Reply { return &lease.Reply{Round: r.Round} })
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	handoff := func(buckets uint64) []byte {
		b := []byte{uint8(rpc.KindHandoff), 1, 2, 'n', '1', 1, 1, 0, 1, 1, 'k'} // id 1; from, id, to-run, no partitions, one counter
		b = append(append(b, uv(60_000)...), uv(buckets)...)
		return append(b, 0, 0, 0, 0, 0) // flags, no buckets, none pending, no fences, no epoch
	}
	if !frametest.Answered(t, addr, handoff(10)) {
		t.Fatal("the server did not answer a valid handoff")
	}
	if frametest.Answered(t, addr, handoff(7)) {
		t.Fatal("the server answered a handoff with an invalid spec")
	}
	if frametest.Answered(t, addr, []byte{uint8(rpc.KindHeartbeat), 1, 0xff}) {
		t.Fatal("the server answered a malformed heartbeat")
	}
}
