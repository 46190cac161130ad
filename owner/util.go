package owner

import (
	"cmp"
	"slices"

	"github.com/leapcount/leapcount/fallback"
)

// sortedKeys returns m's keys in increasing order: what the owner does with a set must
// not depend on map order, or a simulation's seed would not replay.
func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sortRefs sorts counters by key, then shape.
func sortRefs(rs []fallback.CounterRef) {
	slices.SortFunc(rs, func(a, b fallback.CounterRef) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Spec.WindowMs, b.Spec.WindowMs), cmp.Compare(a.Spec.Buckets, b.Spec.Buckets))
	})
}
