//go:build simmutate

package mutate

import "sync/atomic"

var active atomic.Pointer[string]

// On reports whether the mutant named is active.
func On(name string) bool {
	a := active.Load()
	return a != nil && *a == name
}

// Set makes name the active mutant ("" for none).
func Set(name string) { active.Store(&name) }
