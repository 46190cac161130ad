package fairshare

import "sort"

// maxMinFair splits capacity among demands max-min fairly: no share can grow without
// shrinking one that is no larger. Demands below the fair level get what they ask; the
// others share the rest equally. What the demands leave over is split equally among
// all, so that each has room to grow until its next report.
func maxMinFair(demands []float64, capacity float64) []float64 {
	shares := make([]float64, len(demands))
	if len(demands) == 0 || capacity <= 0 {
		return shares
	}
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return demands[order[a]] < demands[order[b]] })
	left := capacity
	for k, i := range order {
		level := left / float64(len(order)-k)
		d := max(demands[i], 0)
		if d > level {
			for _, j := range order[k:] {
				shares[j] = level
			}
			return shares
		}
		shares[i] = d
		left -= d
	}
	spare := left / float64(len(demands))
	for i := range shares {
		shares[i] += spare
	}
	return shares
}
