package counter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseWindow reads a window as the contract allows it: a Go-style duration ("500ms",
// "60s", "1m", "1h30m") or a whole number of milliseconds ("60000"). The result is in
// milliseconds and within [MinWindowMs, MaxWindowMs].
func ParseWindow(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrBadWindow)
	}
	ms, ok := simpleWindow(s)
	if !ok {
		var err error
		if ms, err = anyWindow(s); err != nil {
			return 0, err
		}
	}
	if ms < MinWindowMs || ms > MaxWindowMs {
		return 0, fmt.Errorf("%w %q: must be from 1ms to 31 days", ErrBadWindow, s)
	}
	return ms, nil
}

// anyWindow reads any form of window the contract allows, in milliseconds, not yet
// checked against the bounds.
func anyWindow(s string) (int64, error) {
	if last := s[len(s)-1]; last >= '0' && last <= '9' { // whole milliseconds; a duration ends in a unit
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w %q: want a duration like 60s or 500ms, or whole milliseconds", ErrBadWindow, s)
		}
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want a duration like 60s or 500ms, or whole milliseconds", ErrBadWindow, s)
	}
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%w %q: not a whole number of milliseconds", ErrBadWindow, s)
	}
	return int64(d / time.Millisecond), nil
}

// simpleWindow reads the common forms of a window, up to 9 digits then one unit ("60s",
// "500ms", "1m", "1h"), as time.ParseDuration would, without its unit lookup in a map,
// which costs a pipelined node's CPU on every op (BenchmarkParseWindow). ok is false for
// any other form.
func simpleWindow(s string) (ms int64, ok bool) {
	i := 0
	for ; i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9'; i++ {
		ms = ms*10 + int64(s[i]-'0')
	}
	if i == 0 || i == 10 {
		return 0, false
	}
	switch s[i:] {
	case "ms":
		return ms, true
	case "s":
		return ms * 1000, true
	case "m":
		return ms * 60_000, true
	case "h":
		return ms * 3_600_000, true
	}
	return 0, false
}
