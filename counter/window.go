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
	var ms int64
	if last := s[len(s)-1]; last >= '0' && last <= '9' { // whole milliseconds; a duration ends in a unit
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w %q: want a duration like 60s or 500ms, or whole milliseconds", ErrBadWindow, s)
		}
		ms = n
	} else {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return 0, fmt.Errorf("%w %q: want a duration like 60s or 500ms, or whole milliseconds", ErrBadWindow, s)
		}
		if d%time.Millisecond != 0 {
			return 0, fmt.Errorf("%w %q: not a whole number of milliseconds", ErrBadWindow, s)
		}
		ms = int64(d / time.Millisecond)
	}
	if ms < MinWindowMs || ms > MaxWindowMs {
		return 0, fmt.Errorf("%w %q: must be from 1ms to 31 days", ErrBadWindow, s)
	}
	return ms, nil
}
