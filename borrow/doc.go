// Package borrow is the borrower's side of limit slices (docs/slices-and-replicas.md):
// a node that forwards many allows of one counter to its owner asks, with one of them
// (a counter.Borrow), for a slice of the limit, and then decides the next allows of that
// counter itself, where they arrive, until the slice is spent or ends.
//
// The owner counts a slice in the counter when it lends it, so a borrower's admissions
// are counted before they happen; the slice ends no later than the owner's current
// bucket and its lease. The borrower measures that end on its own monotonic clock from
// when it sent the ask, shortened by the clocks' rate allowance, so it stops spending
// before the owner's bucket ends or anyone else may decide the counter, however the two
// nodes' wall clocks disagree. What it did not spend it gives back (a counter.Return),
// once, to the owner; a return that is lost leaves the counter too high until the bucket
// leaves the window: under-admission, never over-admission.
//
// A Borrower does no I/O: its caller sends the Borrows and Returns it asks for (package
// route in a node, the cluster simulation in tests) and tells it what came back.
package borrow
