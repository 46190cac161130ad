// Package conformance checks that a sliding-window counter store answers exactly as
// another one does: Run drives both with the same random sequence of operations (random
// keys from a small set, random shapes, random n and limit, and a clock that moves
// forward a little, jumps many windows, and steps back) and fails at the first answer
// that differs, printing the seed and the operations that led there.
//
// The reference is normally the in-memory leaparray.Store (Memory adapts it); package
// fallback's tests hold its Redis store to it, and any other implementation (a cluster of
// nodes, another backend) can be held to it the same way by adapting it to Store.
package conformance
