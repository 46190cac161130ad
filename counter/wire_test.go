package counter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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
