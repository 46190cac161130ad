package httpapi

import "testing"

// /v1/allow answers carry RateLimit-Limit, -Remaining and -Reset, and Retry-After when
// denied and a wait helps, in whole seconds rounded up.
func TestAllowRateLimitHeaders(t *testing.T) {
	a := newAPI(t, nil)
	body := `{"key":"u","window":"10s","limit":3}`
	check := func(what string, r reply, limit, remaining, reset, retryAfter string) {
		t.Helper()
		for name, want := range map[string]string{"RateLimit-Limit": limit, "RateLimit-Remaining": remaining,
			"RateLimit-Reset": reset, "Retry-After": retryAfter} {
			if got := r.header.Get(name); got != want {
				t.Errorf("%s: %s: got %q; want %q", what, name, got, want)
			}
		}
	}
	check("allowed", a.post("/v1/allow", body), "3", "2", "10", "")
	a.post("/v1/allow", body)
	a.post("/v1/allow", body)
	check("denied at t0", a.post("/v1/allow", body), "3", "0", "10", "10")
	a.clock.Advance(1_500) // retry_after_ms 8500
	check("denied 1.5s later", a.post("/v1/allow", body), "3", "0", "9", "9")
	check("n over the limit: no wait helps", a.post("/v1/allow", `{"key":"n","window":"1500ms","limit":2,"n":3}`), "2", "2", "2", "")
	// 500ms in 10 buckets: the wait is 50ms, Retry-After at least 1.
	a.post("/v1/allow", `{"key":"s","window":"500ms","limit":1}`)
	check("sub-second wait", a.post("/v1/allow", `{"key":"s","window":"500ms","limit":1}`), "1", "0", "1", "1")
	if r := a.post("/v1/batch", `{"ops":[{"op":"allow","key":"b","window":"1s","limit":1}]}`); r.header.Get("RateLimit-Limit") != "" {
		t.Errorf("batch answer has RateLimit-Limit %q; want none (its ops may have many limits)", r.header.Get("RateLimit-Limit"))
	}
	if r := a.post("/v1/incr", `{"key":"i","window":"1s"}`); r.header.Get("RateLimit-Remaining") != "" {
		t.Errorf("incr answer has RateLimit-Remaining %q; want none", r.header.Get("RateLimit-Remaining"))
	}
}
