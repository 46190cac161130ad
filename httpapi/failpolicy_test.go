package httpapi

import (
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	router "github.com/leapcount/leapcount/route"
)

// notJoined is a router of a node that has joined no cluster: it decides nothing, and
// its fail policy answers every allow.
func notJoined(open bool) *router.Router {
	r := router.New("n0", nil, nil, counter.Limits{})
	r.FailOpen = open
	return r
}

const notJoinedReason = "counter unavailable: this node has not joined a cluster yet"

// An allow answered by the fail policy says so, in its body (fail_policy, reason;
// count and remaining -1) and in Leapcount-Fail-Policy, and its RateLimit-Remaining is
// what the policy grants; a batch's allow answers carry the same fields.
func TestFailPolicyAnswerIsMarked(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail-open=%v", open), func(t *testing.T) {
			a := newAPI(t, func(c *Config) { c.Decider = notJoined(open) })
			policy, remaining, retryAfterMs, retryAfter := "closed", "0", 1000, "1"
			if open {
				policy, remaining, retryAfterMs, retryAfter = "open", "5", 0, ""
			}
			want := map[string]any{"key": "k", "allowed": open, "count": -1, "remaining": -1,
				"retry_after_ms": retryAfterMs, "fail_policy": policy, "reason": notJoinedReason}
			r := a.post("/v1/allow", `{"key":"k","window":"10s","limit":5}`)
			wantOK(t, r, want)
			for name, v := range map[string]string{"Leapcount-Fail-Policy": policy, "RateLimit-Limit": "5",
				"RateLimit-Remaining": remaining, "Retry-After": retryAfter} {
				if got := r.header.Get(name); got != v {
					t.Errorf("%s: got %q; want %q", name, got, v)
				}
			}
			got := results(t, a.post("/v1/batch", `{"ops":[{"op":"allow","key":"k","window":"10s","limit":5},{"op":"incr","key":"k","window":"10s"}]}`))
			wantBody(t, got[0], want)
			wantBody(t, got[1], map[string]any{"error": notJoinedReason})
		})
	}
}

// A decided allow carries neither the fields nor the header of the fail policy.
func TestDecisionIsNotMarked(t *testing.T) {
	a := newAPI(t, nil)
	r := a.post("/v1/allow", `{"key":"k","window":"10s","limit":5}`)
	wantOK(t, r, map[string]any{"key": "k", "allowed": true, "count": 1, "remaining": 4, "retry_after_ms": 0})
	if got := r.header.Get("Leapcount-Fail-Policy"); got != "" {
		t.Errorf("Leapcount-Fail-Policy: got %q on a decision; want none", got)
	}
}
