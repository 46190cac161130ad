package hotkeys

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/internal/wire"
)

func TestReportRoundTrip(t *testing.T) {
	want := Report{SpanMs: 12_500, SampleEvery: 16, Keys: []Hot{
		{Key: "tenant:a", Ops: 16_000, Low: 15_200, High: 16_900, Error: 900, Sliced: true},
		{Key: "", Ops: 16, Low: 1, High: 90, Error: 74},
	}}
	for i := range want.Keys {
		want.Keys[i].PerSecond = float64(want.Keys[i].Ops) * 1000 / float64(want.SpanMs)
	}
	d := wire.NewDecoder(AppendReport(nil, &want, FlagSliced))
	got := ReadReport(&d, 10, FlagSliced)
	if err := d.End(); err != nil || !reportsEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	// Asked without flags (by a release before FlagSliced), the answer is the first
	// release's: no key marked.
	d = wire.NewDecoder(AppendReport(nil, &want, 0))
	got = ReadReport(&d, 10, 0)
	if err := d.End(); err != nil || len(got.Keys) != 2 || got.Keys[0].Sliced {
		t.Fatalf("without flags: got %+v, %v; want both keys, none marked", got, err)
	}
	for _, flags := range []uint64{0, FlagSliced} {
		b := AppendRequest(nil, 37, flags)
		if flags == 0 && len(b) != 1 {
			t.Fatalf("a request without flags is %d bytes; want the first release's one", len(b))
		}
		d = wire.NewDecoder(b)
		if n, f := ReadRequest(&d); d.End() != nil || n != 37 || f != flags {
			t.Fatalf("request: got %d, %d, %v; want 37, %d", n, f, d.Err(), flags)
		}
	}
}

func reportsEqual(a, b Report) bool {
	return a.SpanMs == b.SpanMs && a.SampleEvery == b.SampleEvery && slices.Equal(a.Keys, b.Keys)
}

// What a peer sends is checked, never trusted: a count past what was asked for or past
// the bytes sent, a frame cut short, a zero span, a request out of range: each is
// malformed, and costs no allocation beyond the frame.
func TestReadReportRejectsBadInput(t *testing.T) {
	report := &Report{SpanMs: 1000, SampleEvery: 16, Keys: []Hot{{Key: "a", Ops: 1}, {Key: "b", Ops: 1, Sliced: true}}}
	good := AppendReport(nil, report, 0)
	marked := AppendReport(nil, report, FlagSliced)
	badMark := append([]byte(nil), marked...)
	badMark[len(badMark)-1] = 2
	for name, c := range map[string]struct {
		b     []byte
		top   int
		flags uint64
	}{
		"more keys than asked":      {good, 1, 0},
		"cut short":                 {good[:len(good)-1], 10, 0},
		"huge count":                {[]byte{0xe8, 0x07, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f}, 1000, 0},
		"zero span":                 {AppendReport(nil, &Report{SampleEvery: 16}, 0), 10, 0},
		"key longer than sent":      {[]byte{0xe8, 0x07, 0x10, 1, 0x7f, 'a'}, 10, 0},
		"sample every too high":     {[]byte{0xe8, 0x07, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, 10, 0},
		"sliced asked, not sent":    {good, 10, FlagSliced},
		"sliced neither 0 nor 1":    {badMark, 10, FlagSliced},
		"sliced cut short, one key": {marked[:len(marked)-1], 10, FlagSliced},
	} {
		d := wire.NewDecoder(c.b)
		r := ReadReport(&d, c.top, c.flags)
		if err := d.End(); !errors.Is(err, wire.ErrMalformed) || len(r.Keys) != 0 {
			t.Errorf("%s: got %d keys, %v; want none and ErrMalformed", name, len(r.Keys), err)
		}
	}
	// Marks sent though not asked for read as more keys, or bytes after the last: the
	// caller's End finds them.
	d := wire.NewDecoder(marked)
	if ReadReport(&d, 10, 0); !errors.Is(d.End(), wire.ErrMalformed) {
		t.Errorf("sliced sent, not asked: %v; want ErrMalformed", d.Err())
	}
	for name, b := range map[string][]byte{
		"of 0":           AppendRequest(nil, 0, 0),
		"past MaxTop":    AppendRequest(nil, MaxTop+1, 0),
		"unknown flag":   AppendRequest(nil, 10, 1<<5),
		"flags too long": {10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"after flags":    append(AppendRequest(nil, 10, FlagSliced), 0),
	} {
		d := wire.NewDecoder(b)
		if ReadRequest(&d); !errors.Is(d.End(), wire.ErrMalformed) {
			t.Errorf("request %s: %v; want ErrMalformed", name, d.Err())
		}
	}
}

// An answer stays under MaxReportBytes however long the keys: the least counted are
// left out.
func TestReportStopsShortOfItsBound(t *testing.T) {
	long := strings.Repeat("k", MaxKeyBytes)
	r := Report{SpanMs: 1000, SampleEvery: 16}
	for i := range 8 {
		r.Keys = append(r.Keys, Hot{Key: long[:MaxKeyBytes-i], Ops: uint64(100 - i)})
	}
	b := AppendReport(nil, &r, FlagSliced)
	d := wire.NewDecoder(b)
	got := ReadReport(&d, MaxTop, FlagSliced)
	if err := d.End(); err != nil || len(b) > MaxReportBytes || len(got.Keys) != 3 || got.Keys[0].Ops != 100 {
		t.Fatalf("%d bytes, %d keys (first %d ops), %v; want at most %d bytes, the 3 most counted", len(b), len(got.Keys), got.Keys[0].Ops, err, MaxReportBytes)
	}
}

func TestMergeSumsAKeyOverItsOwners(t *testing.T) {
	a := Decided{Node: "b-node", Report: Report{SpanMs: 20_000, SampleEvery: 16, Keys: []Hot{
		{Key: "moved", Ops: 300, PerSecond: 15, Low: 250, High: 360, Sliced: true},
		{Key: "only-a", Ops: 500, PerSecond: 25, Low: 480, High: 520},
	}}}
	b := Decided{Node: "a-node", Report: Report{SpanMs: 10_000, SampleEvery: 16, Keys: []Hot{
		{Key: "moved", Ops: 400, PerSecond: 40, Low: 380, High: 430},
		{Key: "tail", Ops: 10, PerSecond: 1, Low: 1, High: 40},
	}}}
	got := Merge([]Decided{a, b}, 2)
	if got.SpanMs != 20_000 || got.SampleEvery != 16 || len(got.Keys) != 2 {
		t.Fatalf("got %+v; want span 20000, 2 keys", got)
	}
	m := got.Keys[0]
	if m.Key != "moved" || m.Ops != 700 || m.PerSecond != 55 || m.Low != 630 || m.High != 790 || m.Error != 90 || !slices.Equal(m.Nodes, []string{"a-node", "b-node"}) || !m.Sliced {
		t.Fatalf("first: %+v; want moved, 700 ops (630-790, error 90) on a-node and b-node, sliced (as b-node marks it)", m)
	}
	if k := got.Keys[1]; k.Key != "only-a" || !slices.Equal(k.Nodes, []string{"b-node"}) || k.Sliced {
		t.Fatalf("second: %+v; want only-a on b-node, not sliced", k)
	}
}
