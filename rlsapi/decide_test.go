package rlsapi

import (
	"strings"
	"testing"

	"github.com/leapcount/leapcount/limits"
)

// Check refuses, by file and line, a window the counters cannot keep, and one that
// would silently be fixed while windows slide by default; it takes what slides.
func TestCheckNamesWindowsThatCannotSlide(t *testing.T) {
	for _, c := range []struct {
		window   string
		defaults int
		want     string // "" for none
	}{
		{"window: 7001ms", 0, "could not slide"},
		{"window: 7001ms, buckets: 1", 0, ""},
		{"window: 7001ms", 1, ""}, // --limits-buckets 1: every window fixed, as asked
		{"window: 7s", 0, ""},     // 7 buckets of a second
		{"window: 90s", 0, ""},
		{"unit: minute", 0, ""},
		{"window: 10s, buckets: 3", 0, "divide"},
	} {
		cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {" + c.window + ", requests_per_unit: 5}\n"
		file, err := limits.Parse("w.yaml", []byte(cfg))
		if err != nil {
			t.Fatalf("%s: %v", c.window, err)
		}
		rules, err := limits.Build([]*limits.File{file}, false)
		if err != nil {
			t.Fatalf("%s: %v", c.window, err)
		}
		err = Check(rules, c.defaults)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (default buckets %d): %v; want none", c.window, c.defaults, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "w.yaml:3")):
			t.Errorf("%s (default buckets %d): %v; want w.yaml:3 and %q", c.window, c.defaults, err, c.want)
		}
	}
}
