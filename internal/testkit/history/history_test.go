package history

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{fmt.Errorf("%w: owner gone", counter.ErrOutcomeUnknown), Unknown},
		{fmt.Errorf("%w: moving", counter.ErrUnavailable), Failed},
		{errors.New("anything else"), Failed},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v): got %d; want %d", tc.err, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	var l Log
	for i := 0; i < 5; i++ {
		l.Incr("exact", 1, OK)
		l.Incr("uncertain", 1, OK)
		l.Incr("lossy", 1, OK)
		l.Incr("double", 1, OK)
	}
	l.Incr("uncertain", 1, Unknown)
	l.Incr("double", 1, Failed)
	for i := 0; i < 3; i++ {
		l.Allow("allow", 3, 1, true, OK)
	}
	l.Allow("allow", 3, 1, false, OK)
	final := map[string]int64{"exact": 5, "uncertain": 6, "lossy": 3, "double": 6, "allow": 4}
	s := l.Check(final, Bounds{})
	if s.Lost != 2 || s.Extra != 1 || s.OverAdmitted != 1 || len(s.Violations) != 3 {
		t.Fatalf("got %v %q; want lost 2, extra 1, over-admitted 1, 3 violations", s, s.Violations)
	}
	if s = l.Check(final, Bounds{Loss: 2, OverAdmit: 1}); len(s.Violations) != 1 {
		t.Fatalf("with bounds: got %q; want only the extra count (never allowed)", s.Violations)
	}
}

// Per-key bounds add to the common ones for the keys they name, and only for them.
func TestCheckKeyBounds(t *testing.T) {
	var l Log
	l.Incr("a", 5, OK)
	l.Incr("b", 5, OK)
	l.Allow("x", 3, 1, true, OK)
	final := map[string]int64{"a": 3, "b": 3, "x": 5}
	b := Bounds{Loss: 1, KeyLoss: map[string]int64{"a": 1}, KeyOverAdmit: map[string]int64{"x": 2}}
	s := l.Check(final, b)
	if len(s.Violations) != 1 || s.Lost != 4 || s.OverAdmitted != 2 {
		t.Fatalf("got %v %q; want lost 4, over-admitted 2 and one violation: b lost 2 with 1 allowed", s, s.Violations)
	}
	if got := l.Tally("x"); !got.Allows || got.Admitted != 1 || got.Limit != 3 {
		t.Fatalf("Tally(x) = %+v; want an allow key, limit 3, 1 admitted", got)
	}
}

// An allow answered by the fail policy is Unknown, never an admission, allowed or not:
// a check does not count its fail-open "allowed" as admitted, nor its count, -1.
func TestFailPolicyAnswerIsUnknown(t *testing.T) {
	reason := fmt.Errorf("%w: owner n2 did not answer", counter.ErrOutcomeUnknown)
	for _, res := range []counter.Result{
		{Allowed: true, Count: -1, Remaining: -1, Undecided: reason},
		{Count: -1, Remaining: -1, RetryAfterMs: 1000, Undecided: reason},
	} {
		if got := ClassifyResult(res); got != Unknown {
			t.Errorf("ClassifyResult(%+v): got %d; want Unknown (%d)", res, got, Unknown)
		}
	}
	if got := ClassifyResult(counter.Result{Allowed: true, Count: 1, Remaining: 2}); got != OK {
		t.Errorf("ClassifyResult of a decision: got %d; want OK (%d)", got, OK)
	}
	var l Log
	l.Allow("x", 3, 1, true, ClassifyResult(counter.Result{Allowed: true, Count: 1, Remaining: 2}))
	open := counter.Result{Allowed: true, Count: -1, Remaining: -1, Undecided: reason}
	l.Allow("x", 3, 1, open.Allowed, ClassifyResult(open))
	if got := l.Tally("x").Admitted; got != 1 {
		t.Fatalf("admitted %d; want 1: the fail policy's allowed is not an admission", got)
	}
	if s := l.Check(map[string]int64{"x": 1}, Bounds{}); len(s.Violations) != 0 {
		t.Fatalf("got %v %q; want no violation", s, s.Violations)
	}
}
