//go:build !amd64 && !arm64

package leaparray

// prefetch does nothing where the package has no prefetch instruction written for the
// architecture.
func prefetch(addr uintptr) {}
