package limits

import (
	"fmt"
	"strings"
	"time"
)

// Unit is the unit of a rate_limit, numbered as envoy.service.ratelimit.v3's
// RateLimitResponse.RateLimit.Unit.
type Unit int32

// The units. A month is 30 days and a year 365, as envoyproxy/ratelimit counts them.
const (
	UnitUnknown Unit = iota
	Second
	Minute
	Hour
	Day
	Month
	Year
	Week
)

var unitNames = [...]string{"UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK"}

func (u Unit) String() string {
	if u < 0 || int(u) >= len(unitNames) {
		return fmt.Sprintf("Unit(%d)", int32(u))
	}
	return unitNames[u]
}

// unitOf is the unit exactly d long, else UnitUnknown.
func unitOf(d time.Duration) Unit {
	for u := Second; int(u) < len(unitNames); u++ {
		if u.Duration() == d {
			return u
		}
	}
	return UnitUnknown
}

// Duration is the length of one unit (0 for UnitUnknown).
func (u Unit) Duration() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return day
	case Week:
		return 7 * day
	case Month:
		return 30 * day
	case Year:
		return 365 * day
	}
	return 0
}

// parseUnit reads a unit as envoyproxy/ratelimit does: its name in any case.
func parseUnit(s string) (Unit, bool) {
	for i, n := range unitNames {
		if i > 0 && strings.EqualFold(s, n) {
			return Unit(i), true
		}
	}
	return UnitUnknown, false
}
