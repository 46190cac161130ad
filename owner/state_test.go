package owner

import (
	"errors"
	"testing"
)

// TestStepTable checks Step against its documented table, pair by pair: every pair the
// table lists moves as it says, every pair it names unchanged stays, and every other
// pair is ErrUnknownTransition.
func TestStepTable(t *testing.T) {
	type key struct {
		s State
		e Event
	}
	type to struct {
		s   State
		act Action
	}
	table := map[key]to{
		{Idle, Gained}:                   {Owned, 0},
		{Idle, GainedLent}:               {Lent, 0},
		{Owned, Lost}:                    {Releasing, Release},
		{Stale, Lost}:                    {Releasing, Release},
		{Lent, Lost}:                     {Releasing, Release},
		{LentStale, Lost}:                {Releasing, Release},
		{Owned, Lapsed}:                  {Stale, Reload},
		{Owned, LateWrite}:               {Stale, Reload},
		{Owned, RedisBack}:               {Stale, Reload},
		{Lent, Lapsed}:                   {LentStale, 0},
		{Lent, LateWrite}:                {LentStale, 0},
		{Stale, Reloaded}:                {Owned, 0},
		{Releasing, HandedOn}:            {Idle, 0},
		{Releasing, HandedBack}:          {Owned, 0},
		{Releasing, HandedBackLent}:      {Lent, 0},
		{Lent, CountersBack}:             {Owned, 0},
		{Lent, LendEnded}:                {Owned, 0},
		{LentStale, CountersBack}:        {Stale, Reload},
		{LentStale, LendEnded}:           {Stale, Reload},
		{Releasing, Lapsed}:              {ReleasingStale, 0},
		{Releasing, LateWrite}:           {ReleasingStale, 0},
		{ReleasingStale, HandedOn}:       {Idle, 0},
		{ReleasingStale, HandedBack}:     {Stale, Reload},
		{ReleasingStale, HandedBackLent}: {LentStale, 0},
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
			next, act, err := Step(s, e, true)
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
		if next, act, err := Step(s, Lapsed, false); err != nil || next != s || act != 0 {
			t.Errorf("Step(%v, lapsed) without Redis = %v, %d, %v; want no change", s, next, act, err)
		}
	}
	if next, _, _ := Step(Owned, LateWrite, false); next != Stale {
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
	o.mu.Lock()
	o.decide.Lock()
	act := o.step(0, Reloaded) // only a stale partition is reloaded
	o.unlockDecide()
	o.mu.Unlock()
	if n := o.UnknownTransitions(); n != 1 || act != 0 || o.parts.get(0) != was {
		t.Fatalf("reloaded in %v: %d unknown, action %d, state %v; want 1, none, %v", was, n, act, o.parts.get(0), was)
	}
}
