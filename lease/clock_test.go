package lease

import "time"

// funcClock is a test's manual clock: it reads f. A Keeper sets no timers of its own.
type funcClock func() time.Duration

func (f funcClock) Since() time.Duration { return f() }

func (funcClock) AfterFunc(time.Duration, func()) func() bool {
	panic("lease: a Keeper sets no timers")
}

// clockAt is a Clock that reads *now, which the test moves.
func clockAt(now *time.Duration) funcClock { return func() time.Duration { return *now } }
