// Package history records what clients were told about each operation and checks a
// cluster's final counts against it, Jepsen-style: every op is ok (acknowledged),
// failed (an error that says it was not applied) or unknown (no answer, or an error
// that says it may have been applied).
//
// For a key only incremented, acknowledged − allowed loss ≤ final ≤ acknowledged +
// unknown: below, the cluster lost acknowledged increments; above, it counted one that
// failed, or one twice. For a key only used with allow and a limit, the final count is
// at most the limit plus the over-admission allowed, and at least the admissions
// acknowledged (minus the allowed loss).
package history

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/leapcount/leapcount/counter"
)

// Outcome is what a client knows of an op.
type Outcome uint8

const (
	OK      Outcome = iota // acknowledged
	Failed                 // certainly not applied
	Unknown                // may or may not have been applied
)

// Classify tells an op's outcome from its error.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, counter.ErrOutcomeUnknown):
		return Unknown
	}
	return Failed
}

// ClassifyResult tells an op's outcome from its result. An allow answered by the fail
// policy (Undecided) is Unknown, whatever it says: no decision came back, and its owner
// may have admitted it (its answer lost) or not.
func ClassifyResult(res counter.Result) Outcome {
	if res.Undecided != nil {
		return Unknown
	}
	return Classify(res.Err)
}

// Log is a history of ops, safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	keys map[string]*Tally
}

// Tally is one key's history.
type Tally struct {
	Acked, Failed, Unknown int64 // increments (sums of n)
	Limit                  int64 // allow keys: the limit (every allow on a key uses one)
	Allows                 bool
	Admitted               int64 // allow: n of acknowledged allowed answers
}

func (l *Log) tally(key string) *Tally {
	if l.keys == nil {
		l.keys = map[string]*Tally{}
	}
	t := l.keys[key]
	if t == nil {
		t = &Tally{}
		l.keys[key] = t
	}
	return t
}

// Incr records an incr of n on key.
func (l *Log) Incr(key string, n int64, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tally(key)
	switch o {
	case OK:
		t.Acked += n
	case Failed:
		t.Failed += n
	default:
		t.Unknown += n
	}
}

// Allow records an allow of n on key under limit, and whether it was acknowledged as
// allowed. Only an OK allowed answer is an admission: an Unknown one (a fail policy's
// allowed, say) is not.
func (l *Log) Allow(key string, limit, n int64, allowed bool, o Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tally(key)
	t.Allows, t.Limit = true, limit
	if o == OK && allowed {
		t.Admitted += n
	}
}

// Keys lists the keys seen, sorted.
func (l *Log) Keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.keys))
	for k := range l.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Bounds are what a check allows: loss of acknowledged increments (per key) and
// over-admission past a limit (per key). KeyLoss and KeyOverAdmit add to them for the
// keys they name: a fault's allowance that depends on what the key saw around it (the
// increments acknowledged in the moments before a crash, say).
type Bounds struct {
	Loss, OverAdmit       int64
	KeyLoss, KeyOverAdmit map[string]int64
	// KeyExtra allows a key counts past acknowledged + unknown: a fault that may count
	// some twice (a Handoff in doubt sent elsewhere, its receiver back having applied
	// it).
	KeyExtra map[string]int64
}

func (b Bounds) loss(key string) int64      { return b.Loss + b.KeyLoss[key] }
func (b Bounds) overAdmit(key string) int64 { return b.OverAdmit + b.KeyOverAdmit[key] }

// Tally returns a copy of key's tally (zero for a key not seen).
func (l *Log) Tally(key string) Tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.keys[key]; t != nil {
		return *t
	}
	return Tally{}
}

// Summary sums up a check.
type Summary struct {
	Keys                   int
	Acked, Failed, Unknown int64
	Final                  int64
	Lost, Extra            int64 // acknowledged increments missing; counts past acked + unknown
	OverAdmitted           int64 // counts past a limit
	Violations             []string
}

func (s Summary) String() string {
	return fmt.Sprintf("keys %d: acked %d, failed %d, unknown %d, final %d; lost %d, extra %d, over-admitted %d; %d violations",
		s.Keys, s.Acked, s.Failed, s.Unknown, s.Final, s.Lost, s.Extra, s.OverAdmitted, len(s.Violations))
}

// Check compares final counts with the history.
func (l *Log) Check(final map[string]int64, b Bounds) Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s Summary
	bad := func(format string, args ...any) {
		if len(s.Violations) < 20 {
			s.Violations = append(s.Violations, fmt.Sprintf(format, args...))
		}
	}
	for key, t := range l.keys {
		got := final[key]
		s.Keys++
		s.Final += got
		if t.Allows {
			if over := got - t.Limit; over > 0 {
				s.OverAdmitted += over
				// (A count may pass the limit by what was counted and never admitted, as a
				// limit slice's unspent part that Redis kept: KeyExtra. Admissions past the
				// limit are the caller's to check, from Tally.)
				if over > b.overAdmit(key)+b.KeyExtra[key] {
					bad("%s: count %d past limit %d (allowed over-admission %d, extra %d)", key, got, t.Limit, b.overAdmit(key), b.KeyExtra[key])
				}
			}
			if lost := t.Admitted - got; lost > 0 {
				s.Lost += lost
				if lost > b.loss(key) {
					bad("%s: %d admissions acknowledged, count %d (allowed loss %d)", key, t.Admitted, got, b.loss(key))
				}
			}
			continue
		}
		s.Acked += t.Acked
		s.Failed += t.Failed
		s.Unknown += t.Unknown
		if lost := t.Acked - got; lost > 0 {
			s.Lost += lost
			if lost > b.loss(key) {
				bad("%s: count %d; %d acknowledged (lost %d, allowed %d)", key, got, t.Acked, lost, b.loss(key))
			}
		}
		if extra := got - (t.Acked + t.Unknown); extra > 0 {
			s.Extra += extra
			if extra > b.KeyExtra[key] {
				bad("%s: count %d; at most %d acknowledged + %d unknown (allowed extra %d)", key, got, t.Acked, t.Unknown, b.KeyExtra[key])
			}
		}
	}
	slices.Sort(s.Violations)
	return s
}
