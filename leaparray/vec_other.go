//go:build !linux

package leaparray

// Elsewhere than Linux the slabs stay on the Go heap (no mremap to grow a mapping).

const pageSize = 4096

func mapBytes(int) ([]byte, bool)               { return nil, false }
func remapBytes(b []byte, _ int) ([]byte, bool) { return b, false }
func unmapBytes([]byte)                         { panic("leaparray: nothing is mapped") }
