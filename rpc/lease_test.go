package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/lease"
)

func testSet(n int, ps ...int) lease.Set {
	s := lease.NewSet(n)
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

// A heartbeat and its reply cross the wire intact (sets keep their shape, trailing
// zero words included: a grantor checks it), and ops go on on the same connection.
func TestExchangeRoundTrip(t *testing.T) {
	o := startOwner(t, "")
	req := &lease.Request{From: "n1", Incarnation: 1 << 40, Round: 7, Claims: testSet(256, 0, 63, 64, 130),
		Releases: testSet(256), Voters: []string{"n1", "n2", "n3"}, Version: 7, Alive: []string{"n1", "n3"}}
	rep := &lease.Reply{Round: 7, Refused: lease.RefusedNone, Granted: testSet(256, 63, 130),
		Voters: []string{"n1", "n2", "n3"}, Version: 9, Alive: []string{"n2"}}
	var mu sync.Mutex
	var got *lease.Request
	o.srv.SetLeaseHandler(func(r *lease.Request) *lease.Reply {
		mu.Lock()
		defer mu.Unlock()
		got = r
		return rep
	})
	idle := o.srv.lastFrame.Load()
	c := NewClient(Config{})
	defer c.Close()
	back, err := c.Exchange(context.Background(), o.addr, req)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, req) {
		t.Fatalf("request: got %+v; want %+v", got, req)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Fatalf("reply: got %+v; want %+v", back, rep)
	}
	if o.srv.lastFrame.Load() != idle {
		t.Fatal("a heartbeat counted as a request: IdleFor would never grow on a member")
	}
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil || res[0].Count != 1 {
		t.Fatalf("ops after a heartbeat: %v %+v", err, res[0])
	}
	if c.Stats().Frames != 2 {
		t.Fatalf("frames: got %d; want 2 (the heartbeat went on a frame of its own)", c.Stats().Frames)
	}
}

// A node without a lease handler, or whose reply is out of bounds, answers no reply;
// the connection goes on.
func TestExchangeNoReply(t *testing.T) {
	o := startOwner(t, "")
	c := NewClient(Config{})
	defer c.Close()
	req := &lease.Request{From: "n1", Round: 1}
	if _, err := c.Exchange(context.Background(), o.addr, req); !errors.Is(err, ErrNoLeaseReply) {
		t.Fatalf("no handler: got %v; want ErrNoLeaseReply", err)
	}
	o2 := startOwner(t, "")
	o2.srv.SetLeaseHandler(func(*lease.Request) *lease.Reply {
		return &lease.Reply{Alive: make([]string, lease.MaxMembers+1)}
	})
	if _, err := c.Exchange(context.Background(), o2.addr, req); !errors.Is(err, ErrNoLeaseReply) {
		t.Fatalf("reply out of bounds: got %v; want ErrNoLeaseReply", err)
	}
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil {
		t.Fatalf("ops after a heartbeat without reply: %v", err)
	}
}

// A heartbeat beyond the wire's bounds fails at once, unsent.
func TestExchangeRefusesOutOfBounds(t *testing.T) {
	c := NewClient(Config{})
	defer c.Close()
	long := strings.Repeat("x", lease.MaxNameBytes+1)
	for name, req := range map[string]*lease.Request{
		"from":    {From: long},
		"voter":   {Voters: []string{"a", long}},
		"members": {Alive: make([]string, lease.MaxMembers+1)},
		"claims":  {Claims: lease.NewSet(lease.MaxPartitions + 64)},
	} {
		if _, err := c.Exchange(context.Background(), "127.0.0.1:1", req); err == nil {
			t.Errorf("%s: sent a heartbeat beyond the bounds", name)
		}
	}
	if got := c.Stats().Frames; got != 0 {
		t.Fatalf("frames: got %d; want 0", got)
	}
}

// leaseFrame builds a heartbeat frame body (type onwards) from raw parts.
func leaseFrame(parts ...[]byte) []byte {
	b := []byte{frameLease, 1}
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func nameOf(n int) []byte { return append(uv(uint64(n)), strings.Repeat("n", n)...) }

func namesOf(count, size int) []byte {
	b := uv(uint64(count))
	for i := 0; i < count; i++ {
		b = append(b, nameOf(size)...)
	}
	return b
}

func zeroSet(words int) []byte { return append(uv(uint64(words)), make([]byte, words)...) }

// A heartbeat frame: from, incarnation, round, claims, releases, voters, alive, the
// voters' version (absent in the legacy format). The heartbeat decoder takes everything up to its bounds and nothing beyond.
func TestDecodeLeaseBounds(t *testing.T) {
	zero := uv(0)
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"empty", leaseFrame(nameOf(0), zero, zero, zero, zero, zero, zero, zero), true},
		{"longest name", leaseFrame(nameOf(lease.MaxNameBytes), zero, zero, zero, zero, zero, zero, zero), true},
		{"name too long", leaseFrame(nameOf(lease.MaxNameBytes+1), zero, zero, zero, zero, zero, zero, zero), false},
		{"most members", leaseFrame(nameOf(1), zero, zero, zero, zero, namesOf(lease.MaxMembers, 1), zero, zero), true},
		{"too many members", leaseFrame(nameOf(1), zero, zero, zero, zero, zero, namesOf(lease.MaxMembers+1, 1), zero), false},
		{"legacy: no version", leaseFrame(nameOf(1), zero, zero, zero, zero, zero, zero), true},
		{"member name too long", leaseFrame(nameOf(1), zero, zero, zero, zero, namesOf(1, lease.MaxNameBytes+1), zero, zero), false},
		{"largest set", leaseFrame(nameOf(1), zero, zero, zeroSet(lease.MaxPartitions/64), zero, zero, zero, zero), true},
		{"set too large", leaseFrame(nameOf(1), zero, zero, zero, zeroSet(lease.MaxPartitions/64+1), zero, zero, zero), false},
		{"count beyond the bytes", leaseFrame(nameOf(1), zero, zero, uv(1<<40)), false},
		{"truncated", leaseFrame(nameOf(1), zero, zero, zero, zero, zero), false},
		{"trailing bytes", leaseFrame(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero), false},
		{"overlong varint", leaseFrame(nameOf(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}), false},
	} {
		var req lease.Request
		_, err := decodeLeaseFrame(tc.frame, &req)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v; want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadFrame) {
			t.Errorf("%s: got %v; want ErrBadFrame", tc.name, err)
		}
	}
}

// A heartbeat in the legacy format (no voters' version: a node of an earlier version)
// is understood and answered in that format, which such a node can read; a node sends
// its heartbeats to such a peer in it too.
func TestLegacyHeartbeatsAreAnsweredInKind(t *testing.T) {
	o := startOwner(t, "")
	o.srv.SetLeaseHandler(func(r *lease.Request) *lease.Reply {
		return &lease.Reply{Round: r.Round, Voters: []string{"n1"}, Version: 3}
	})
	c := NewClient(Config{})
	defer c.Close()
	for _, legacy := range []bool{true, false} {
		req := &lease.Request{From: "n1", Round: 5, Voters: []string{"n1"}, Version: 3, Legacy: legacy}
		frame := appendLeaseRequest(appendHeader(nil, frameLease, 1), req)
		var back lease.Request
		if _, err := decodeLeaseFrame(frame[4:], &back); err != nil || back.Legacy != legacy {
			t.Fatalf("legacy=%v: decoded %+v, %v", legacy, back, err)
		}
		rep, err := c.Exchange(context.Background(), o.addr, req)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Legacy != legacy || (!legacy && rep.Version != 3) || (legacy && rep.Version != 0) {
			t.Fatalf("legacy=%v: answered %+v", legacy, rep)
		}
	}
}

// A malformed heartbeat drops the connection; a malformed reply drops the client's.
func TestMalformedLeaseFrames(t *testing.T) {
	o := startOwner(t, "")
	o.srv.SetLeaseHandler(func(r *lease.Request) *lease.Reply { return &lease.Reply{Round: r.Round} })
	for _, body := range [][]byte{
		leaseFrame(nameOf(lease.MaxNameBytes + 1)),
		leaseFrame(nameOf(1), uv(0), uv(0), zeroSet(lease.MaxPartitions/64+1)),
		leaseFrame(nameOf(1), uv(0), uv(0), uv(0), uv(0), uv(lease.MaxMembers+1)),
	} {
		if answered(t, o.addr, body) {
			t.Errorf("%x...: the server answered a malformed heartbeat", body[:min(len(body), 16)])
		}
	}

	// A peer answering with a refusal code that does not exist.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := newFrameReader(nc, frameStall).next(nil); err != nil {
			return
		}
		out := appendHeader(nil, frameLeaseReply, 1)
		out = append(out, leaseReplied, 1, uint8(lease.RefusedWrongShape)+1, 0, 0, 0)
		finishFrame(out, 0)
		nc.Write(out)
		nc.Read(make([]byte, 1)) // until the client hangs up
	}()
	c := NewClient(Config{})
	defer c.Close()
	_, err = c.Exchange(context.Background(), ln.Addr().String(), &lease.Request{Round: 1})
	if !errors.Is(err, ErrBadFrame) || !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("malformed reply: got %v; want ErrConnectionLost (ErrBadFrame)", err)
	}
}

// answered sends one raw frame body on a new connection and reports whether the
// server answered it (rather than hanging up).
func answered(t *testing.T, addr string, body []byte) bool {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	nc.Write(append(frame, body...))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server neither answered nor hung up")
	}
	return err == nil
}
