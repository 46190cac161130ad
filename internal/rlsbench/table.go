package rlsbench

import (
	"fmt"
	"strings"
)

// Table renders rows as a Markdown table, each with its ratio to the baseline's row of
// the same descriptor count (when the run measured one).
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| server | descriptors | requests/s | server CPU µs per request | requests per server CPU-second | vs envoyproxy/ratelimit |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		ratio := "-"
		if x, ok := Ratio(rows, r.Nodes, r.Descriptors); ok {
			ratio = fmt.Sprintf("%.1f×", x)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.1f | %s | %s |\n", r.Server, r.Descriptors, thousands(r.Rate), r.CPUMicros,
			thousands(r.PerCPUSecond()), ratio)
	}
	return b.String()
}

// Ratio is leapcount's requests per CPU-second on a cluster of nodes over the
// baseline's, with the same descriptor count; ok is false when either was not measured.
func Ratio(rows []Row, nodes, descriptors int) (float64, bool) {
	var base, got *Row
	for i := range rows {
		r := &rows[i]
		if r.Descriptors != descriptors {
			continue
		}
		switch {
		case r.Nodes == 0:
			base = r
		case r.Nodes == nodes:
			got = r
		}
	}
	if base == nil || got == nil || nodes == 0 {
		return 0, false
	}
	return got.PerCPUSecond() / base.PerCPUSecond(), true
}

// thousands formats n rounded, with commas.
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
