package counter

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
