package counter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// A full owner's refusal reaches the node that forwarded the op as ErrFull, worded once.
func TestFullCrossesTheHop(t *testing.T) {
	sent := fmt.Errorf("%w: this node holds its most counters", ErrFull)
	got := codeErr(errCode(sent), sent.Error())
	if !errors.Is(got, ErrFull) || errors.Is(got, ErrUnavailable) || got.Error() != sent.Error() {
		t.Errorf("got %q (ErrFull %v); want %q as ErrFull only", got, errors.Is(got, ErrFull), sent)
	}
	if n := strings.Count(got.Error(), ErrFull.Error()); n != 1 {
		t.Errorf("message names the sentinel %d times; want once", n)
	}
}

// A result code that does not exist is malformed: the wire has one set of codes.
func TestUnknownResultCodeIsMalformed(t *testing.T) {
	b := Wire{}.AppendResult(nil, &Result{Err: fmt.Errorf("%w: full", ErrFull)})
	b[0] = codeFull + 1
	d := wire.NewDecoder(b)
	var r Result
	Wire{}.ReadResult(&d, &r)
	if err := d.End(); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("got %v (%+v); want wire.ErrMalformed", err, r)
	}
}

// Borrow, Return and a lent slice cross the hop whole; a plain result keeps the flags
// byte a release before slices reads as existed.
func TestSlicesCrossTheHop(t *testing.T) {
	ops := []Op{
		{Kind: Borrow, Key: "k", Window: 60000, Buckets: 10, N: 2, Limit: 100, Ask: 12},
		{Kind: Return, Key: "k", Window: 60000, Buckets: 10, N: 5, SliceID: 1<<40 | 7},
		{Kind: Allow, Key: "k", Window: 60000, Buckets: 10, N: 1, Limit: 100},
	}
	for _, op := range ops {
		d := wire.NewDecoder(Wire{}.AppendOp(nil, &op))
		var got Op
		Wire{}.ReadOp(&d, &got)
		if err := d.End(); err != nil || got != op {
			t.Errorf("%v: got %+v (%v); want %+v", op.Kind, got, err, op)
		}
	}
	results := []Result{
		{Count: 40, Allowed: true, Remaining: 60, Lent: &Lent{ID: 9, N: 7, TTL: 4200 * time.Millisecond}},
		{Count: 3, Allowed: true, Remaining: 1, Sliced: true},
		{Existed: true},
	}
	for _, r := range results {
		b := Wire{}.AppendResult(nil, &r)
		d := wire.NewDecoder(b)
		var got Result
		Wire{}.ReadResult(&d, &got)
		if err := d.End(); err != nil || fmt.Sprint(got.Count, got.Allowed, got.Remaining, got.Sliced, got.Existed) !=
			fmt.Sprint(r.Count, r.Allowed, r.Remaining, r.Sliced, r.Existed) || (r.Lent == nil) != (got.Lent == nil) ||
			(r.Lent != nil && *r.Lent != *got.Lent) {
			t.Errorf("got %+v %+v (%v); want %+v %+v", got, got.Lent, err, r, r.Lent)
		}
	}
	if b := (Wire{}).AppendResult(nil, &Result{Existed: true}); b[len(b)-1] != 1 {
		t.Errorf("a plain result's flags byte is %d; want 1, as releases before slices wrote it", b[len(b)-1])
	}
}

// Only nodes send Borrow and Return, and only well formed: a Borrow asks for 1 or more.
func TestSliceOpsAreValidated(t *testing.T) {
	var l Limits
	bad := []Op{
		{Kind: Borrow, Key: "k", Window: 1000, Buckets: 10, N: 1, Limit: 5},
		{Kind: Return, Key: "k", Window: 1000, Buckets: 10, N: 0, SliceID: 1},
		{Kind: Return + 1, Key: "k", Window: 1000, Buckets: 10, N: 1},
	}
	for _, op := range bad {
		if err := l.Validate(&op); err == nil || !IsBadInput(err) {
			t.Errorf("%+v: got %v; want a bad-input error", op, err)
		}
	}
	ask := Op{Kind: Borrow, Key: "k", Window: 1000, Buckets: 10, N: 0, Limit: 5, Ask: 2}
	if err := l.Validate(&ask); err != nil {
		t.Errorf("an ask alone (a Borrow of nothing): %v", err)
	}
	if _, err := ParseKind("borrow"); err == nil {
		t.Errorf("ParseKind took borrow: clients must not send it")
	}
}
