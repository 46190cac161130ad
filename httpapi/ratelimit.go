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
//   - RateLimit-Remaining: remaining, as in the body.
//   - RateLimit-Reset, in seconds rounded up: when denied, the wait until the same
//     request would pass with no other traffic (retry_after_ms); when allowed, or when
//     no wait helps (n over the limit), the window: a sliding window frees its count
//     bucket by bucket, and with no further traffic all of the limit is free again
//     within one window. That is an upper bound the answer can state without reading
//     the counter's buckets again.
//   - Retry-After (RFC 9110), seconds rounded up and at least 1: only when denied and
//     a wait helps.
func setRateLimitHeaders(h http.Header, op *counter.Op, res *counter.Result) {
	h.Set("RateLimit-Limit", strconv.FormatInt(op.Limit, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(res.Remaining, 10))
	reset := ceilSeconds(op.Window)
	if !res.Allowed && res.RetryAfterMs >= 0 {
		reset = max(1, ceilSeconds(res.RetryAfterMs))
		h.Set("Retry-After", strconv.FormatInt(reset, 10))
	}
	h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
}

func ceilSeconds(ms int64) int64 { return (ms + 999) / 1000 }
