package owner

import (
	"errors"
	"testing"
	"time"
)

// TestStepTable checks Step's State table (stateStep) against its documentation, pair by pair: every pair the
// table lists moves as it says, every pair it names unchanged stays, and every other
// pair is ErrUnknownTransition.
func TestStepTable(t *testing.T) {
	type key struct {
		s State
		e Kind
	}
	type to struct {
		s   State
		act Action
	}
	table := map[key]to{
		{Idle, Gained}:                  {Owned, 0},
		{Idle, GainedLent}:              {Lent, 0},
		{Owned, Lost}:                   {Releasing, Release},
		{Stale, Lost}:                   {Releasing, Release},
		{Lent, Lost}:                    {Releasing, Release},
		{LentStale, Lost}:               {Releasing, Release},
		{Owned, Lapsed}:                 {Stale, Reload},
		{Owned, LateWrite}:              {Stale, Reload},
		{Owned, RedisBack}:              {Stale, Reload},
		{Lent, Lapsed}:                  {LentStale, 0},
		{Lent, LateWrite}:               {LentStale, 0},
		{Stale, Reloaded}:               {Owned, 0},
		{Releasing, Released}:           {Idle, 0},
		{Releasing, Reclaimed}:          {Owned, 0},
		{Releasing, ReclaimedLent}:      {Lent, 0},
		{Lent, CountersBack}:            {Owned, 0},
		{Lent, LendEnded}:               {Owned, 0},
		{LentStale, CountersBack}:       {Stale, Reload},
		{LentStale, LendEnded}:          {Stale, Reload},
		{Releasing, Lapsed}:             {ReleasingStale, 0},
		{Releasing, LateWrite}:          {ReleasingStale, 0},
		{ReleasingStale, Released}:      {Idle, 0},
		{ReleasingStale, Reclaimed}:     {Stale, Reload},
		{ReleasingStale, ReclaimedLent}: {LentStale, 0},
	}
	same := map[key]bool{}
	for s := Owned; s <= ReleasingStale; s++ {
		same[key{s, Gained}], same[key{s, GainedLent}] = true, true
	}
	for _, s := range []State{Idle, Releasing, ReleasingStale} {
		same[key{s, Lost}] = true
	}
	for _, s := range []State{Idle, Stale, LentStale, ReleasingStale} {
		same[key{s, Lapsed}], same[key{s, LateWrite}] = true, true
	}
	for s := Idle; s <= ReleasingStale; s++ {
		for e := Gained; e <= GainedLent; e++ {
			next, act, err := stateStep(s, e, true)
			want, listed := table[key{s, e}]
			switch {
			case listed && (err != nil || next != want.s || act != want.act):
				t.Errorf("Step(%v, %v) = %v, %d, %v; want %v, %d", s, e, next, act, err, want.s, want.act)
			case same[key{s, e}] && (err != nil || next != s || act != 0):
				t.Errorf("Step(%v, %v) = %v, %d, %v; want no change", s, e, next, act, err)
			case !listed && !same[key{s, e}] && (!errors.Is(err, ErrUnknownTransition) || next != s || act != 0):
				t.Errorf("Step(%v, %v) = %v, %d, %v; want ErrUnknownTransition, the state kept", s, e, next, act, err)
			}
		}
	}
	// Without Redis a lapse keeps memory: it is what this node counted.
	for _, s := range []State{Owned, Lent, Releasing} {
		if next, act, err := stateStep(s, Lapsed, false); err != nil || next != s || act != 0 {
			t.Errorf("Step(%v, lapsed) without Redis = %v, %d, %v; want no change", s, next, act, err)
		}
	}
	if next, _, _ := stateStep(Owned, LateWrite, false); next != Stale {
		t.Errorf("a late write makes Owned %v without Redis; want stale (marks exist only with Redis, but the table holds)", next)
	}
}

// TestStateNames: every state and event has a name, and an unknown one says so.
func TestStateNames(t *testing.T) {
	for s := Idle; s <= ReleasingStale; s++ {
		if s.String() == "" || s.String()[0] == 's' && s.String() != "stale" {
			t.Errorf("state %d named %q", s, s)
		}
	}
	for e := Gained; e <= GainedLent; e++ {
		if e.String() == "" || len(e.String()) > 5 && e.String()[:5] == "event" {
			t.Errorf("event %d named %q", e, e)
		}
	}
	if got := State(200).String(); got != "state(200)" {
		t.Errorf("unknown state named %q", got)
	}
}

// An event the state machine does not expect in a partition's state is counted, and
// the state kept.
func TestUnknownTransitionIsCounted(t *testing.T) {
	o, _, _ := waitingOwner(t)
	was := o.parts.get(0)
	o.lock()
	o.decide.Lock()
	act := o.step(0, on(Reloaded)) // only a stale partition is reloaded
	o.unlockDecide()
	o.unlock()
	if n := o.UnknownTransitions(); n != 1 || act != 0 || o.parts.get(0) != was {
		t.Fatalf("reloaded in %v: %d unknown, action %d, state %v; want 1, none, %v", was, n, act, o.parts.get(0), was)
	}
}

// TestStepRecord checks what Step does to a Record besides its State, rule by rule as
// its doc lists them, along paths a partition takes.
func TestStepRecord(t *testing.T) {
	must := func(r Record, e Event) Record {
		t.Helper()
		next, _, err := Step(r, e, true)
		if err != nil {
			t.Fatalf("Step(%v, %v): %v", r.State, e, err)
		}
		return next
	}
	to := lend{to: "b", since: time.Second}

	r := must(Record{}, on(Gained))
	if r.State != Owned || r.Gen != 1 {
		t.Fatalf("gained: %+v; want owned, generation 1", r)
	}
	r = must(r, on(Blinded))
	r = must(r, on(RedisLost))
	if !r.Blind || !r.Due || r.Gen != 1 {
		t.Fatalf("blinded, redis-lost: %+v; want blind, due, generation 1 still", r)
	}
	r = must(r, on(Lapsed))
	if r.State != Stale || !r.Lapsed || r.Gen != 2 {
		t.Fatalf("lapsed: %+v; want stale, lapsed, generation 2", r)
	}
	if d := must(r, on(Dropped)); d.Due || d.Lapsed || d.Blind || d.State != Stale {
		t.Fatalf("dropped: %+v; want stale with nothing owed, lapsed or blind", d)
	}
	r = must(r, on(Lost))
	if r.State != Releasing || r.Blind || r.Due || !r.Lapsed {
		t.Fatalf("lost: %+v; want releasing, not blind nor due, still lapsed", r)
	}
	r = must(r, Event{Kind: Released, Lend: to})
	if r.State != Idle || r.Lapsed || r.Lend != to {
		t.Fatalf("released: %+v; want idle, not lapsed, remembering where the counters went", r)
	}
	if g := must(r, on(GainedLent)); g.State != Lent || g.Lend != to {
		t.Fatalf("gained-lent: %+v; want lent to %v", g, to)
	}
	if g := must(r, on(Gained)); g.State != Owned || g.Lend != (lend{}) {
		t.Fatalf("gained: %+v; want owned, lent to none", g)
	}

	r = must(Record{State: Releasing}, Event{Kind: ReclaimedLent, Lend: to})
	if r.State != Lent || r.Lend != to {
		t.Fatalf("reclaimed-lent: %+v; want lent to %v", r, to)
	}
	if b := must(r, on(CountersBack)); b.State != Owned || b.Lend != (lend{}) {
		t.Fatalf("counters-back: %+v; want owned, lent to none", b)
	}

	r = must(must(Record{State: Releasing}, on(RedisLost)), on(Released))
	if r.Due {
		t.Fatal("a release that ended left an idle partition due a write-back: its memory left")
	}
	r = must(Record{}, on(RedisLost))
	if r.Due {
		t.Fatal("redis-lost made an idle partition due a write-back: nothing of it is here")
	}
	r = must(Record{State: Owned, Gen: 4}, Event{Kind: Decided, Ms: 10})
	r = must(r, Event{Kind: Decided, Ms: 20})
	if r.Fresh.DecidedGen != 5 || r.Fresh.DecidedSince != 10 {
		t.Fatalf("decided twice in one generation: %+v; want since the first (10)", r.Fresh)
	}
	r = must(r, Event{Kind: StampRead, Gen: 4, Ms: 300})
	r = must(r, Event{Kind: StampRead, Gen: 4, Ms: 200})
	if r.Fresh.Before != 200 || r.Fresh.QuietAt != 200 || r.Fresh.QuietGen != 5 {
		t.Fatalf("two stamps read: %+v; want the lowest before, the last quiet", r.Fresh)
	}
	r = must(r, on(CountersIn))
	r = must(r, on(Installed))
	if r.Gen != 5 || r.Fresh.DecidedGen != 0 || r.Fresh.QuietGen != 0 {
		t.Fatalf("counters handed in: %+v; want generation 5, nothing known for the load skip", r)
	}
}

// Step refuses to make a Record that breaks its invariants, and keeps the one it had.
func TestStepKeepsRecordsWhole(t *testing.T) {
	for _, c := range []struct {
		r Record
		e Event
	}{
		{Record{}, on(GainedLent)},                                     // lent, to no node
		{Record{State: Releasing}, on(ReclaimedLent)},                  // the same
		{Record{State: Owned, Gen: 1}, Event{Kind: StampRead, Gen: 5}}, // a generation to come
	} {
		next, act, err := Step(c.r, c.e, true)
		if !errors.Is(err, ErrBrokenRecord) || next != c.r || act != 0 {
			t.Errorf("Step(%+v, %v) = %+v, %d, %v; want ErrBrokenRecord, the record kept", c.r, c.e, next, act, err)
		}
	}
}
