//go:build amd64 || arm64

package leaparray

// prefetch hints the CPU to load addr's cache line; it never faults, whatever addr is.
//
//go:noescape
func prefetch(addr uintptr)
