package rpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

// A full owner's refusal reaches the node that forwarded the op as ErrFull, worded once.
func TestFullCrossesTheHop(t *testing.T) {
	sent := fmt.Errorf("%w: this node holds its most counters", counter.ErrFull)
	got := codeErr(errCode(sent), sent.Error())
	if !errors.Is(got, counter.ErrFull) || errors.Is(got, counter.ErrUnavailable) || got.Error() != sent.Error() {
		t.Errorf("got %q (ErrFull %v); want %q as ErrFull only", got, errors.Is(got, counter.ErrFull), sent)
	}
	if n := strings.Count(got.Error(), counter.ErrFull.Error()); n != 1 {
		t.Errorf("message names the sentinel %d times; want once", n)
	}
}
