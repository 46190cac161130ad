// Package mutate switches off, on purpose, one safety rule of the ownership code at a
// time, so that the cluster simulation can show it catches the loss or double count that
// follows (make sim-mutants). Built without the simmutate tag, On is a constant false
// and every check of it compiles away: production binaries carry no mutant.
package mutate

// The mutants: each names the one rule it breaks.
const (
	// DecideWithoutLease: an owner decides an owned partition whether or not it holds
	// the partition's lease (owner.judge).
	DecideWithoutLease = "decide-without-lease"
	// IgnoreFence: a partition waiting for another node's write in doubt is decided and
	// released as if it waited for none (owner fences).
	IgnoreFence = "ignore-fence"
	// EndLendEarly: counters lent to another node are taken as back at the next tick,
	// before that node hands them back (owner.expireLends).
	EndLendEarly = "end-lend-early"
	// SkipResetCheck: a counter loaded from Redis is installed even when it was reset
	// while the load was under way (owner load, leaparray.Store.TrySeed).
	SkipResetCheck = "skip-reset-check"
	// ApplyHandoffTwice: a receiver applies a Handoff it applied already (a resend whose
	// first answer was lost) instead of acknowledging it (owner.received).
	ApplyHandoffTwice = "apply-handoff-twice"
	// IgnoreClocks: an owner skips loads as if every node's counters' clock agreed
	// with its own and never stepped: a partition decided here for longer than a window
	// holds nothing older in Redis, whatever other nodes stamped it with; a stamp, and a
	// departed write's date, are the clock alone, not the newest bucket they cover; and
	// the node's own offset against Redis is not asked (owner/loadskip.go, clock.go).
	IgnoreClocks = "ignore-clocks"
	// LendPastLimit: an owner lends every slice asked for whatever the limit has left,
	// even with the allow it came with denied (owner/slices.go).
	LendPastLimit = "lend-past-limit"
	// ReturnTwice: an owner takes a slice's return each time it comes, not once
	// (owner.takeBack).
	ReturnTwice = "return-twice"
	// SpendPastDeadline: a borrower admits from a slice until it is spent, whatever its
	// deadline (borrow.Borrower.Spend).
	SpendPastDeadline = "spend-past-deadline"
)

// All lists every mutant.
var All = []string{DecideWithoutLease, IgnoreFence, EndLendEarly, SkipResetCheck, ApplyHandoffTwice, IgnoreClocks,
	LendPastLimit, ReturnTwice, SpendPastDeadline}
