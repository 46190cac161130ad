package lease

import (
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/wire"
)

func testSet(n int, ps ...int) Set {
	s := NewSet(n)
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

// readRequest decodes a whole heartbeat.
func readRequest(body []byte) (Request, error) {
	var r Request
	d := wire.NewDecoder(body)
	ReadRequest(&d, &r)
	return r, d.End()
}

// A heartbeat and its reply cross the wire intact: sets keep their shape, trailing
// zero words included (a grantor checks it).
func TestHeartbeatRoundTrip(t *testing.T) {
	req := &Request{From: "n1", Incarnation: 1 << 40, Round: 7, Claims: testSet(256, 0, 63, 64, 130),
		Releases: testSet(256), Voters: []string{"n1", "n2", "n3"}, Version: 7, Alive: []string{"n1", "n3"}}
	rep := &Reply{Round: 7, Refused: RefusedNone, Granted: testSet(256, 63, 130),
		Voters: []string{"n1", "n2", "n3"}, Version: 9, Alive: []string{"n2"}}
	var got *Request
	answer, err := Answerer(func(r *Request) *Reply { got = r; return rep })(context.Background(), AppendRequest(nil, req), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Fatalf("request: got %+v; want %+v", got, req)
	}
	d := wire.NewDecoder(answer)
	back, err := ReadAnswer(&d)
	if err != nil || d.End() != nil {
		t.Fatalf("answer: %v, %v", err, d.End())
	}
	if !reflect.DeepEqual(back, rep) {
		t.Fatalf("reply: got %+v; want %+v", back, rep)
	}
}

// A node without a lease handler, or whose reply is out of bounds, answers no reply.
func TestHeartbeatNoReply(t *testing.T) {
	body := AppendRequest(nil, &Request{From: "n1", Round: 1})
	for name, handle := range map[string]func(*Request) *Reply{
		"no handler":      nil,
		"reply too large": func(*Request) *Reply { return &Reply{Alive: make([]string, MaxMembers+1)} },
	} {
		answer, err := Answerer(handle)(context.Background(), body, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := wire.NewDecoder(answer)
		if _, err := ReadAnswer(&d); !errors.Is(err, ErrNoReply) || d.End() != nil {
			t.Fatalf("%s: got %v (%v); want ErrNoReply", name, err, d.End())
		}
	}
}

// CheckRequest refuses what a receiver would: a sender checks before it sends.
func TestCheckRequestBounds(t *testing.T) {
	long := strings.Repeat("x", MaxNameBytes+1)
	for name, req := range map[string]*Request{
		"from":    {From: long},
		"voter":   {Voters: []string{"a", long}},
		"members": {Alive: make([]string, MaxMembers+1)},
		"claims":  {Claims: NewSet(MaxPartitions + 64)},
	} {
		if err := CheckRequest(req); err == nil {
			t.Errorf("%s: a heartbeat beyond the bounds passed", name)
		}
		if _, err := readRequest(AppendRequest(nil, req)); err == nil {
			t.Errorf("%s: the receiver took a heartbeat CheckRequest refuses", name)
		}
	}
}

func heartbeat(parts ...[]byte) []byte {
	var b []byte
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

// A heartbeat: from, incarnation, round, claims, releases, voters, alive, the voters'
// version (absent in the legacy format). The decoder takes everything up to its bounds
// and nothing beyond.
func TestDecodeHeartbeatBounds(t *testing.T) {
	zero := uv(0)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"empty", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero), true},
		{"longest name", heartbeat(nameOf(MaxNameBytes), zero, zero, zero, zero, zero, zero, zero), true},
		{"name too long", heartbeat(nameOf(MaxNameBytes+1), zero, zero, zero, zero, zero, zero, zero), false},
		{"most members", heartbeat(nameOf(1), zero, zero, zero, zero, namesOf(MaxMembers, 1), zero, zero), true},
		{"too many members", heartbeat(nameOf(1), zero, zero, zero, zero, zero, namesOf(MaxMembers+1, 1), zero), false},
		{"legacy: no version", heartbeat(nameOf(1), zero, zero, zero, zero, zero, zero), true},
		{"member name too long", heartbeat(nameOf(1), zero, zero, zero, zero, namesOf(1, MaxNameBytes+1), zero, zero), false},
		{"largest set", heartbeat(nameOf(1), zero, zero, zeroSet(MaxPartitions/64), zero, zero, zero, zero), true},
		{"set too large", heartbeat(nameOf(1), zero, zero, zero, zeroSet(MaxPartitions/64+1), zero, zero, zero), false},
		{"count beyond the bytes", heartbeat(nameOf(1), zero, zero, uv(1<<40)), false},
		{"truncated", heartbeat(nameOf(1), zero, zero, zero, zero, zero), false},
		{"no ballots: no change", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero), true},
		{"no change proposed", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero), true},
		{"prepare", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{1}, uv(3), uv(7), nameOf(2), zero), true},
		{"accept", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{2}, uv(3), uv(7), nameOf(2), namesOf(2, 2)), true},
		{"unknown change phase", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{3}, uv(3), uv(7), nameOf(2), zero), false},
		{"ballot name too long", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{1}, uv(3), uv(7), nameOf(MaxNameBytes+1), zero), false},
		{"too many in a change", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{2}, uv(3), uv(7), nameOf(2), namesOf(MaxMembers+1, 1)), false},
		{"trailing bytes", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, zero), false},
		{"overlong varint", heartbeat(nameOf(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}), false},
	} {
		_, err := readRequest(tc.body)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v; want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: got %v; want wire.ErrMalformed", tc.name, err)
		}
	}
}

// A heartbeat in the legacy format (no voters' version: a node of an earlier version)
// is understood and answered in that format, which such a node can read.
func TestLegacyHeartbeatsAreAnsweredInKind(t *testing.T) {
	answer := Answerer(func(r *Request) *Reply { return &Reply{Round: r.Round, Voters: []string{"n1"}, Version: 3} })
	for _, legacy := range []bool{true, false} {
		req := &Request{From: "n1", Round: 5, Voters: []string{"n1"}, Version: 3, Legacy: legacy}
		if back, err := readRequest(AppendRequest(nil, req)); err != nil || back.Legacy != legacy {
			t.Fatalf("legacy=%v: decoded %+v, %v", legacy, back, err)
		}
		out, err := answer(context.Background(), AppendRequest(nil, req), nil)
		if err != nil {
			t.Fatal(err)
		}
		d := wire.NewDecoder(out)
		rep, err := ReadAnswer(&d)
		if err != nil || d.End() != nil {
			t.Fatalf("legacy=%v: %v, %v", legacy, err, d.End())
		}
		if rep.Legacy != legacy || (!legacy && rep.Version != 3) || (legacy && rep.Version != 0) {
			t.Fatalf("legacy=%v: answered %+v", legacy, rep)
		}
	}
}

// An answer with a refusal code that does not exist is malformed.
func TestUnknownRefusalIsMalformed(t *testing.T) {
	d := wire.NewDecoder([]byte{replied, 1, uint8(RefusedWrongShape) + 1, 0, 0, 0})
	ReadAnswer(&d)
	if err := d.End(); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("got %v; want wire.ErrMalformed", err)
	}
}

// A heartbeat's change message and its answer's acceptor state go through the wire as
// they are; without ballots (NoBallots) neither is sent, and the answer comes alike.
func TestChangeMessagesOnTheWire(t *testing.T) {
	m := &ChangeMsg{Base: 4, Ballot: Ballot{N: 9, By: "n2"}, Accept: true, Value: []string{"n1", "n2"}}
	st := &ChangeState{Base: 4, Promised: Ballot{N: 9, By: "n2"}, Accepted: Ballot{N: 8, By: "n1"}, Value: []string{"n1"}}
	answer := Answerer(func(r *Request) *Reply { return &Reply{Round: r.Round, Version: 4, Change: st} })
	for _, without := range []bool{false, true} {
		req := &Request{From: "n2", Round: 5, Version: 4, Change: m, NoBallots: without}
		back, err := readRequest(AppendRequest(nil, req))
		if err != nil || back.NoBallots != without {
			t.Fatalf("noBallots=%v: decoded %+v, %v", without, back, err)
		}
		if want := map[bool]*ChangeMsg{false: m}[without]; !reflect.DeepEqual(back.Change, want) {
			t.Fatalf("noBallots=%v: change %+v; want %+v", without, back.Change, want)
		}
		out, err := answer(context.Background(), AppendRequest(nil, req), nil)
		if err != nil {
			t.Fatal(err)
		}
		d := wire.NewDecoder(out)
		rep, err := ReadAnswer(&d)
		if err != nil || d.End() != nil {
			t.Fatalf("noBallots=%v: %v, %v", without, err, d.End())
		}
		if want := map[bool]*ChangeState{false: st}[without]; rep.NoBallots != without || !reflect.DeepEqual(rep.Change, want) {
			t.Fatalf("noBallots=%v: answered %+v, change %+v", without, rep, rep.Change)
		}
	}
}
