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
		Drops: testSet(256), Voters: []string{"n1", "n2", "n3"}, Version: 7, Alive: []string{"n1", "n3"},
		SentAt: 1_700_000_000_123}
	rep := &Reply{Round: 7, Refused: RefusedNone, Granted: testSet(256, 63, 130),
		Voters: []string{"n1", "n2", "n3"}, Version: 9, Alive: []string{"n2"}, ReceivedAt: -5, RepliedAt: 1_700_000_008_125}
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

// A voter's reply names the members it finds silent; one that finds none sends what a
// node of the version before the field reads, and reads the same back.
func TestReplySilentOnTheWire(t *testing.T) {
	rep := &Reply{Round: 3, Granted: testSet(64, 1), Voters: []string{"a"}, Version: 1, Silent: []string{"m4", "m9"}}
	d := wire.NewDecoder(AppendAnswer(nil, rep))
	if back, err := ReadAnswer(&d); err != nil || d.End() != nil || !reflect.DeepEqual(back, rep) {
		t.Fatalf("reply with silent members: got %+v (%v, %v); want %+v", back, err, d.End(), rep)
	}
	rep.Silent = nil
	without := AppendAnswer(nil, rep)
	d = wire.NewDecoder(without)
	ReadAnswer(&d)
	if d.End() != nil {
		t.Fatalf("reply without silent members: %v", d.End())
	}
	d = wire.NewDecoder(append(without, 0x80)) // a count cut short
	ReadAnswer(&d)
	if d.Err() == nil && d.End() == nil {
		t.Fatal("a reply whose silent names are cut short decoded")
	}
	tooMany := &Reply{Silent: make([]string, MaxMembers+1)}
	d = wire.NewDecoder(AppendAnswer(nil, tooMany))
	if _, err := ReadAnswer(&d); !errors.Is(err, ErrNoReply) {
		t.Fatalf("a reply of %d silent names: %v; want none sent (ErrNoReply)", MaxMembers+1, err)
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

// A heartbeat: from, incarnation, round, claims, drops, voters, alive, the voters'
// version, the change message, the sender's clock. The decoder takes everything up to its bounds and
// nothing beyond, and nothing less: every field is required.
func TestDecodeHeartbeatBounds(t *testing.T) {
	zero := uv(0)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{
		{"empty", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, zero), true},
		{"no sent at", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero), false},
		{"longest name", heartbeat(nameOf(MaxNameBytes), zero, zero, zero, zero, zero, zero, zero, zero, zero), true},
		{"name too long", heartbeat(nameOf(MaxNameBytes+1), zero, zero, zero, zero, zero, zero, zero, zero), false},
		{"most members", heartbeat(nameOf(1), zero, zero, zero, zero, namesOf(MaxMembers, 1), zero, zero, zero, zero), true},
		{"too many members", heartbeat(nameOf(1), zero, zero, zero, zero, zero, namesOf(MaxMembers+1, 1), zero, zero), false},
		{"no voters' version", heartbeat(nameOf(1), zero, zero, zero, zero, zero, zero), false},
		{"no change message", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero), false},
		{"member name too long", heartbeat(nameOf(1), zero, zero, zero, zero, namesOf(1, MaxNameBytes+1), zero, zero, zero), false},
		{"largest set", heartbeat(nameOf(1), zero, zero, zeroSet(MaxPartitions/64), zero, zero, zero, zero, zero, zero), true},
		{"set too large", heartbeat(nameOf(1), zero, zero, zero, zeroSet(MaxPartitions/64+1), zero, zero, zero, zero), false},
		{"count beyond the bytes", heartbeat(nameOf(1), zero, zero, uv(1<<40)), false},
		{"truncated", heartbeat(nameOf(1), zero, zero, zero, zero, zero), false},
		{"no change proposed", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, zero), true},
		{"sent at", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, binary.AppendVarint(nil, -1_700_000_000_000)), true},
		{"prepare", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{1}, uv(3), uv(7), nameOf(2), zero, zero), true},
		{"accept", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{2}, uv(3), uv(7), nameOf(2), namesOf(2, 2), zero), true},
		{"unknown change phase", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{3}, uv(3), uv(7), nameOf(2), zero), false},
		{"ballot name too long", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{1}, uv(3), uv(7), nameOf(MaxNameBytes+1), zero), false},
		{"too many in a change", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{2}, uv(3), uv(7), nameOf(2), namesOf(MaxMembers+1, 1)), false},
		{"trailing bytes", heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, zero, zero), false},
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

// An answer with a refusal code that does not exist is malformed.
func TestUnknownRefusalIsMalformed(t *testing.T) {
	d := wire.NewDecoder([]byte{replied, 1, uint8(RefusedWrongShape) + 1, 0, 0, 0})
	ReadAnswer(&d)
	if err := d.End(); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("got %v; want wire.ErrMalformed", err)
	}
}

// A heartbeat's change message and its answer's acceptor state go through the wire as
// they are.
func TestChangeMessagesOnTheWire(t *testing.T) {
	m := &ChangeMsg{Base: 4, Ballot: Ballot{N: 9, By: "n2"}, Accept: true, Value: []string{"n1", "n2"}}
	st := &ChangeState{Base: 4, Promised: Ballot{N: 9, By: "n2"}, Accepted: Ballot{N: 8, By: "n1"}, Value: []string{"n1"}}
	answer := Answerer(func(r *Request) *Reply { return &Reply{Round: r.Round, Version: 4, Change: st} })
	req := &Request{From: "n2", Round: 5, Version: 4, Change: m}
	back, err := readRequest(AppendRequest(nil, req))
	if err != nil || !reflect.DeepEqual(back.Change, m) {
		t.Fatalf("decoded change %+v, %v; want %+v", back.Change, err, m)
	}
	out, err := answer(context.Background(), AppendRequest(nil, req), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.NewDecoder(out)
	rep, err := ReadAnswer(&d)
	if err != nil || d.End() != nil {
		t.Fatalf("%v, %v", err, d.End())
	}
	if !reflect.DeepEqual(rep.Change, st) {
		t.Fatalf("answered change %+v; want %+v", rep.Change, st)
	}
}

// An answer without the voters' version, the acceptor state or the grantor's clock
// readings is malformed: every field of the one format is required.
func TestAnswerMissingAFieldIsMalformed(t *testing.T) {
	full := AppendAnswer(nil, &Reply{Round: 7, Granted: testSet(64, 3), Voters: []string{"n1"}, Version: 2, Alive: []string{"n1"}})
	for cut := 1; cut <= 4; cut++ { // replied at, received at, the state's presence byte, then the version too
		d := wire.NewDecoder(full[:len(full)-cut])
		ReadAnswer(&d)
		if err := d.End(); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("answer without its last %d bytes: got %v; want wire.ErrMalformed", cut, err)
		}
	}
	d := wire.NewDecoder(full)
	if _, err := ReadAnswer(&d); err != nil || d.End() != nil {
		t.Fatalf("the whole answer: %v, %v", err, d.End())
	}
}
