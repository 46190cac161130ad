package benchharness

import (
	"math"
	"testing"
	"time"
)

func TestTable(t *testing.T) {
	got := table([]string{"side", "ops/s"}, [][]string{{"Redis INCR", "98.1k"}, {"a|b"}})
	want := "| side | ops/s |\n| --- | --- |\n| Redis INCR | 98.1k |\n| a\\|b |  |\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtRate(950), "950"}, {fmtRate(98_149), "98.1k"}, {fmtRate(1_234_000), "1.23M"},
		{fmtDur(850), "850 ns"}, {fmtDur(12_345), "12.3 µs"}, {fmtDur(345_000), "345 µs"},
		{fmtDur(1_250_000), "1.25 ms"}, {fmtDur(4200 * time.Millisecond), "4.2 s"},
		{fmtDur(time.Duration(math.MaxInt64)), "∞"},
		{fmtBytes(94), "94 B"}, {fmtBytes(12.5 * (1 << 20)), "12.5 MiB"}, {fmtBytes(1.3 * (1 << 30)), "1.30 GiB"},
		{fmtRatio(1.234), "1.23x"}, {fmtRatio(ratio(1, 0)), "n/a"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
