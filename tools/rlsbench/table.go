package rlsbench

import (
	"fmt"
	"strings"
)

// Table renders rows as a Markdown table, each leapcount row with its ratio to the
// baseline's single instance with the same descriptor count, and to as many
// envoyproxy/ratelimit instances as it has nodes (when the run measured them).
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| server | descriptors | requests/s | server CPU µs per request | requests per server CPU-second | vs envoyproxy/ratelimit | vs as many envoyproxy/ratelimit instances | reads and writes per request | context switches per request |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		ratio, same := "-", "-"
		if x, ok := Ratio(rows, r.Nodes, r.Descriptors); ok && !r.TLS {
			ratio = fmt.Sprintf("%.1f×", x)
		}
		if x, ok := RatioSameCount(rows, r.Nodes, r.Descriptors); ok && !r.TLS {
			same = fmt.Sprintf("%.1f×", x)
		}
		if x, ok := TLSCost(rows, r.Descriptors); ok && r.TLS {
			ratio = fmt.Sprintf("%.2f× of plaintext's", x)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.1f | %s | %s | %s | %.2f | %.2f |\n", r.Server, r.Descriptors, thousands(r.Rate), r.CPUMicros,
			thousands(r.PerCPUSecond()), ratio, same, r.Syscalls, r.Switches)
	}
	return b.String()
}

// Ratio is leapcount's requests per CPU-second on a cluster of nodes over the
// baseline's single instance, with the same descriptor count (the target of issue 24);
// ok is false when either was not measured.
func Ratio(rows []Row, nodes, descriptors int) (float64, bool) {
	return ratio(rows, nodes, 1, descriptors)
}

// RatioSameCount is leapcount's requests per CPU-second on a cluster of nodes over
// that of as many envoyproxy/ratelimit instances sharing one Redis: a deployment of
// the same shape, where each process also sees its share of the load.
func RatioSameCount(rows []Row, nodes, descriptors int) (float64, bool) {
	return ratio(rows, nodes, nodes, descriptors)
}

// TLSCost is the one-node TLS row's requests per CPU-second over the same node's
// plaintext row, with the same descriptor count; ok is false when either is missing.
func TLSCost(rows []Row, descriptors int) (float64, bool) {
	var plain, tls *Row
	for i := range rows {
		r := &rows[i]
		if r.Descriptors != descriptors || r.Nodes != 1 {
			continue
		}
		if r.TLS {
			tls = r
		} else {
			plain = r
		}
	}
	if plain == nil || tls == nil {
		return 0, false
	}
	return tls.PerCPUSecond() / plain.PerCPUSecond(), true
}

// Find is leapcount's row on a cluster of nodes with that many descriptors, over
// plaintext.
func Find(rows []Row, nodes, descriptors int) (Row, bool) {
	for _, r := range rows {
		if r.Nodes == nodes && r.Descriptors == descriptors && !r.TLS {
			return r, true
		}
	}
	return Row{}, false
}

func ratio(rows []Row, nodes, instances, descriptors int) (float64, bool) {
	var base, got *Row
	for i := range rows {
		r := &rows[i]
		if r.Descriptors != descriptors || r.TLS {
			continue
		}
		switch {
		case r.Nodes == 0 && max(r.Instances, 1) == instances:
			base = r
		case r.Nodes != 0 && r.Nodes == nodes:
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
