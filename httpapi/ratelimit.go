package httpapi

import (
	"net/http"
	"strconv"

	"github.com/leapcount/leapcount/counter"
)

// setRateLimitHeaders adds to an allow's answer the fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers (its RateLimit-Limit, -Remaining and -Reset
// form), so that clients and proxies that know them need not read the body:
//
//   - RateLimit-Limit: the limit.
//   - RateLimit-Remaining: remaining, as in the body; on an answer of the fail policy,
//     whose remaining is unknown (-1), what the policy grants: 0 when it denies, the
//     limit when it allows.
//   - RateLimit-Reset, in seconds rounded up: when denied, the wait until the same
//     request would pass with no other traffic (retry_after_ms); when allowed, or when
//     no wait helps (n over the limit), the window: a sliding window frees its count
//     bucket by bucket, and with no further traffic all of the limit is free again
//     within one window. That is an upper bound the answer can state without reading
//     the counter's buckets again.
//   - Retry-After (RFC 9110), seconds rounded up and at least 1: only when denied and
//     a wait helps.
func setRateLimitHeaders(h http.Header, op *counter.Op, res *counter.Result) {
	// One backing array for every value, and the keys in their canonical form (as
	// Header.Set would write them) so that none is rewritten: BenchmarkHandler/allow.
	v := make([]string, 4)
	set := func(i int, key string, n int64) {
		v[i] = strconv.FormatInt(n, 10)
		h[key] = v[i : i+1 : i+1]
	}
	set(0, "Ratelimit-Limit", op.Limit)
	set(1, "Ratelimit-Remaining", headerRemaining(op, res))
	reset := ceilSeconds(op.Window)
	if !res.Allowed && res.RetryAfterMs >= 0 {
		reset = max(1, ceilSeconds(res.RetryAfterMs))
		set(2, "Retry-After", reset)
	}
	set(3, "Ratelimit-Reset", reset)
}

// headerRemaining is RateLimit-Remaining: the field takes no negative value, so a fail
// policy's answer says what the policy grants.
func headerRemaining(op *counter.Op, res *counter.Result) int64 {
	switch {
	case res.Undecided == nil:
		return res.Remaining
	case res.Allowed:
		return op.Limit
	}
	return 0
}

func ceilSeconds(ms int64) int64 { return (ms + 999) / 1000 }
