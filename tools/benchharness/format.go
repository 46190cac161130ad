package benchharness

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// table renders a Markdown table; a row shorter than the header is padded.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range header {
			c := ""
			if i < len(cells) {
				c = strings.ReplaceAll(cells[i], "|", `\|`)
			}
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// fmtRate is an operation rate: 950, 98.1k, 1.23M.
func fmtRate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}

// fmtDur is a duration at a precision that suits it: 850 ns, 12.3 µs, 1.25 ms, 4.2 s.
func fmtDur(d time.Duration) string {
	switch {
	case d == time.Duration(math.MaxInt64):
		return "∞"
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < 100*time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// fmtBytes is a size: 94 B, 12.5 MiB, 1.30 GiB.
func fmtBytes(b float64) string {
	switch {
	case math.Abs(b) >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case math.Abs(b) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case math.Abs(b) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// fmtRatio is a ratio, "1.23x"; "n/a" when it has no meaning.
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", r)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
