package rpc

import (
	"context"
	"encoding/binary"
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
	req := testRequest{Budget: time.Second, Ops: []counter.Op{incr("a", 1)}}
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

// An ops frame carries its budget in whole milliseconds, as it is, up to the longest a
// time.Duration holds; a frame without one, or with more, or with a flag that does not
// exist, is malformed.
func TestBudgetOnTheWire(t *testing.T) {
	sent := testRequest{Epoch: 7, Forwarded: true, Budget: 1500 * time.Millisecond, Ops: []counter.Op{incr("a", 1), incr("b", 2)}}
	var got testRequest
	if _, err := decodeRequestFrame(encodeRequestFrame(nil, 1, sent)[4:], &got); err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", sent) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, sent)
	}
	spent := testRequest{Budget: -time.Second, Ops: sent.Ops}
	if _, err := decodeRequestFrame(encodeRequestFrame(nil, 1, spent)[4:], &got); err != nil || got.Budget != 0 {
		t.Fatalf("a spent budget: decoded %v, %v; want 0", got.Budget, err)
	}
	longest := testRequest{Budget: time.Duration(1<<63 - 1), Ops: sent.Ops}
	if _, err := decodeRequestFrame(encodeRequestFrame(nil, 1, longest)[4:], &got); err != nil || got.Budget != maxBudgetMs*time.Millisecond {
		t.Fatalf("the longest budget: decoded %v, %v; want %v", got.Budget, err, maxBudgetMs*time.Millisecond)
	}
	body := func(flags uint8, rest ...[]byte) []byte {
		b := binary.AppendUvarint([]byte{frameRequest}, 1) // id
		b = append(b, flags)
		for _, r := range rest {
			b = append(b, r...)
		}
		return b
	}
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	for name, frame := range map[string][]byte{
		"no budget":       body(flagForwarded, uv(7)),
		"budget too long": body(flagForwarded, uv(7), uv(maxBudgetMs+1), uv(0)),
		"an unknown flag": body(flagForwarded|2, uv(7), uv(1000), uv(0)),
		"no op count":     body(0, uv(7), uv(1000)),
		"bytes after":     body(0, uv(7), uv(1000), uv(0), uv(0)),
	} {
		if _, err := decodeRequestFrame(frame, &got); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: got %v; want wire.ErrMalformed", name, err)
		}
	}
	if _, err := decodeRequestFrame(body(0, uv(7), uv(1000), uv(0)), &got); err != nil || got.Budget != time.Second {
		t.Fatalf("a frame of no ops: %+v, %v", got, err)
	}
}
