package owner

import "testing"

// TestStepTable checks Step against its documented table, pair by pair: every pair the
// table lists moves as it says, and every other pair leaves the state as it is.
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
	for s := Idle; s <= ReleasingStale; s++ {
		for e := Gained; e <= GainedLent; e++ {
			next, act, ok := Step(s, e, true)
			want, listed := table[key{s, e}]
			switch {
			case listed && (!ok || next != want.s || act != want.act):
				t.Errorf("Step(%v, %v) = %v, %d, %v; want %v, %d", s, e, next, act, ok, want.s, want.act)
			case !listed && (ok || next != s || act != 0):
				t.Errorf("Step(%v, %v) = %v, %d, %v; want no change", s, e, next, act, ok)
			}
		}
	}
	// Without Redis a lapse keeps memory: it is what this node counted.
	for _, s := range []State{Owned, Lent, Releasing} {
		if next, act, ok := Step(s, Lapsed, false); ok || next != s || act != 0 {
			t.Errorf("Step(%v, lapsed) without Redis = %v, %d, %v; want no change", s, next, act, ok)
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
