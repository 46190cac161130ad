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
		{Key: "tenant:a", Ops: 16_000, Low: 15_200, High: 16_900, Error: 900},
		{Key: "", Ops: 16, Low: 1, High: 90, Error: 74},
	}}
	for i := range want.Keys {
		want.Keys[i].PerSecond = float64(want.Keys[i].Ops) * 1000 / float64(want.SpanMs)
	}
	d := wire.NewDecoder(AppendReport(nil, &want))
	got := ReadReport(&d, 10)
	if err := d.End(); err != nil || !reportsEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	d = wire.NewDecoder(AppendRequest(nil, 37))
	if n := ReadRequest(&d); d.End() != nil || n != 37 {
		t.Fatalf("request: got %d, %v; want 37", n, d.Err())
	}
}

func reportsEqual(a, b Report) bool {
	return a.SpanMs == b.SpanMs && a.SampleEvery == b.SampleEvery && slices.Equal(a.Keys, b.Keys)
}

// What a peer sends is checked, never trusted: a count past what was asked for or past
// the bytes sent, a frame cut short, a zero span, a request out of range: each is
// malformed, and costs no allocation beyond the frame.
func TestReadReportRejectsBadInput(t *testing.T) {
	good := AppendReport(nil, &Report{SpanMs: 1000, SampleEvery: 16, Keys: []Hot{{Key: "a", Ops: 1}, {Key: "b", Ops: 1}}})
	for name, c := range map[string]struct {
		b   []byte
		top int
	}{
		"more keys than asked":  {good, 1},
		"cut short":             {good[:len(good)-1], 10},
		"huge count":            {[]byte{0xe8, 0x07, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f}, 1000},
		"zero span":             {AppendReport(nil, &Report{SampleEvery: 16}), 10},
		"key longer than sent":  {[]byte{0xe8, 0x07, 0x10, 1, 0x7f, 'a'}, 10},
		"sample every too high": {[]byte{0xe8, 0x07, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, 10},
	} {
		d := wire.NewDecoder(c.b)
		r := ReadReport(&d, c.top)
		if err := d.End(); !errors.Is(err, wire.ErrMalformed) || len(r.Keys) != 0 {
			t.Errorf("%s: got %d keys, %v; want none and ErrMalformed", name, len(r.Keys), err)
		}
	}
	for _, n := range []int{0, MaxTop + 1} {
		d := wire.NewDecoder(AppendRequest(nil, n))
		if ReadRequest(&d); !errors.Is(d.End(), wire.ErrMalformed) {
			t.Errorf("request of %d: %v; want ErrMalformed", n, d.Err())
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
	b := AppendReport(nil, &r)
	d := wire.NewDecoder(b)
	got := ReadReport(&d, MaxTop)
	if err := d.End(); err != nil || len(b) > MaxReportBytes || len(got.Keys) != 3 || got.Keys[0].Ops != 100 {
		t.Fatalf("%d bytes, %d keys (first %d ops), %v; want at most %d bytes, the 3 most counted", len(b), len(got.Keys), got.Keys[0].Ops, err, MaxReportBytes)
	}
}

func TestMergeSumsAKeyOverItsOwners(t *testing.T) {
	a := Decided{Node: "b-node", Report: Report{SpanMs: 20_000, SampleEvery: 16, Keys: []Hot{
		{Key: "moved", Ops: 300, PerSecond: 15, Low: 250, High: 360},
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
	if m.Key != "moved" || m.Ops != 700 || m.PerSecond != 55 || m.Low != 630 || m.High != 790 || m.Error != 90 || !slices.Equal(m.Nodes, []string{"a-node", "b-node"}) {
		t.Fatalf("first: %+v; want moved, 700 ops (630-790, error 90) on a-node and b-node", m)
	}
	if k := got.Keys[1]; k.Key != "only-a" || !slices.Equal(k.Nodes, []string{"b-node"}) {
		t.Fatalf("second: %+v; want only-a on b-node", k)
	}
}
