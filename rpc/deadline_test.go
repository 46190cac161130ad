package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wire"
)

// pastDeadline is a context whose deadline has passed but which never ends, so its
// call is queued and written anyway: the deadline passed before its frame was written.
type pastDeadline struct {
	context.Context
	at time.Time
}

func (c pastDeadline) Deadline() (time.Time, bool) { return c.at, true }

// skewed returns a clock running off ahead of this one (behind, for a negative off).
func skewed(off time.Duration) func(*testServer) {
	return func(s *testServer) { s.now = func() time.Time { return time.Now().Add(off) } }
}

// An owner whose wall clock is minutes ahead of the sender's, or behind it, decides
// forwarded ops as any other (before, ahead it answered every one counter.ErrExpired), and
// still does not decide a frame whose time had run out before it was written (behind,
// it decided those).
func TestOwnerClockSkew(t *testing.T) {
	for _, off := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		t.Run(fmt.Sprint("owner ", off), func(t *testing.T) {
			o := startOwner(t, "", skewed(off))
			c := newTestClient(Config{Timeout: 10 * time.Second})
			defer c.Close()
			res := make([]counter.Result, 1)
			for i := int64(1); i <= 3; i++ {
				if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil || res[0].Err != nil || res[0].Count != i {
					t.Fatalf("call %d: got %v %+v; want count %d", i, err, res[0], i)
				}
			}
			if r := outcome(t, startGo(context.Background(), c, o.addr, incr("a", 1))); r.err != nil || r.res[0].Err != nil || r.res[0].Count != 4 {
				t.Fatalf("Go: got %v %+v; want count 4", r.err, r.res)
			}
			late := pastDeadline{context.Background(), time.Now().Add(-time.Second)}
			if err := c.Do(late, o.addr, fwd(incr("late", 1)), res); err != nil || !errors.Is(res[0].Err, counter.ErrExpired) {
				t.Fatalf("call out of time when written: got %v %+v; want answered counter.ErrExpired", err, res[0])
			}
			if got := o.local.Store.Count("late", spec10, t0); got != 0 {
				t.Fatalf("count of late: got %d; want 0 (expired)", got)
			}
		})
	}
}

// A frame's budget counts from the moment the owner read it, on the owner's clock,
// whatever that clock reads: the handler gets what is left of it as its deadline, and
// a frame whose budget ran out before its turn came is not decided.
func TestBudgetCountsFromReading(t *testing.T) {
	var left time.Duration
	s := newTestServer(testHandlerFunc(func(ctx context.Context, _ *testRequest, res []counter.Result) {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		res[0].Count = 1
	}), nil)
	read := time.Now().Add(-time.Hour) // any clock: only spans on it count
	req := testRequest{Budget: time.Second, HasBudget: true, Ops: []counter.Op{incr("a", 1)}}
	for _, tc := range []struct {
		elapsed time.Duration
		decided bool
	}{{0, true}, {900 * time.Millisecond, true}, {time.Second, false}, {time.Minute, false}} {
		s.now = func() time.Time { return read.Add(tc.elapsed) }
		left = 0
		res := make([]counter.Result, 1)
		s.handle(context.Background(), read, &req, res)
		switch {
		case tc.decided && (res[0].Count != 1 || left <= 0 || left > req.Budget-tc.elapsed):
			t.Fatalf("%v after reading: got %+v with %v left; want decided with at most %v left", tc.elapsed, res[0], left, req.Budget-tc.elapsed)
		case !tc.decided && !errors.Is(res[0].Err, counter.ErrExpired):
			t.Fatalf("%v after reading: got %+v; want counter.ErrExpired", tc.elapsed, res[0])
		}
	}
}

// previousRequest decodes an ops frame's body as the previous version did: it knows
// flag bit 0 only, and reads the deadline field as unix ms.
func previousRequest(d *wire.Decoder, req *testRequest) {
	flags := d.Byte("flags")
	req.Forwarded = flags&flagForwarded != 0
	req.Epoch = d.Uvarint("epoch")
	req.Deadline = d.Int63("deadline")
	n := d.Count("op count", 7, MaxFrameBytes)
	req.Ops = req.Ops[:0]
	for i := 0; i < n && d.Err() == nil; i++ {
		op := counter.Op{Kind: counter.Kind(d.Byte("kind"))}
		op.Key = string(d.Bytes("key"))
		op.Window = d.Int63("window")
		op.Buckets = int(min(d.Uvarint("buckets"), 1<<31))
		op.N = d.Int63("n")
		op.Limit = d.Int63("limit")
		req.Ops = append(req.Ops, op)
	}
}

// During a rolling upgrade each version reads the other's ops frames: a node of the
// previous version reads a budget as a deadline thousands of years away (as good as
// none, where a budget read as unix ms would expire every op), and this version reads
// the previous one's deadline, and keeps to it.
func TestBudgetFrameAcrossVersions(t *testing.T) {
	sent := testRequest{Epoch: 7, Forwarded: true, Budget: 1500 * time.Millisecond, HasBudget: true, Ops: []counter.Op{incr("a", 1), incr("b", 2)}}
	frame := appendRequestFrame(nil, 1, sent)[4:]
	d := wire.NewDecoder(frame)
	d.Byte("type")
	d.Uvarint("id")
	var old testRequest
	previousRequest(&d, &old)
	if err := d.End(); err != nil {
		t.Fatalf("the previous version's decoder refuses a frame with a budget: %v", err)
	}
	if old.Epoch != sent.Epoch || !old.Forwarded || fmt.Sprint(old.Ops) != fmt.Sprint(sent.Ops) {
		t.Fatalf("the previous version reads %+v; want %+v", old, sent)
	}
	if at := time.UnixMilli(old.Deadline); at.Before(time.Now().AddDate(1000, 0, 0)) {
		t.Fatalf("the previous version reads the budget as the deadline %v; want none, or as good as none", at)
	}
	var got testRequest
	if _, err := decodeRequestFrame(frame, &got); err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", sent) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, sent)
	}

	prev := testRequest{Epoch: 7, Forwarded: true, Deadline: time.Now().Add(time.Minute).UnixMilli(), Ops: []counter.Op{incr("a", 1)}}
	if _, err := decodeRequestFrame(appendRequestFrame(nil, 1, prev)[4:], &got); err != nil || got.HasBudget || got.Deadline != prev.Deadline {
		t.Fatalf("a frame of the previous version: decoded %+v, %v; want its deadline, %d, and no budget", got, err, prev.Deadline)
	}
}
