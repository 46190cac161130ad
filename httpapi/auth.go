package httpapi

import (
	"crypto/subtle"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/leapcount/leapcount/internal/authlimit"
)

// Authorizer checks a request's bearer token, within its source's budget of wrong
// guesses. The server checks its routes with one; the node checks /debug/pprof/ with
// the same.
type Authorizer struct {
	Token   string             // empty: every request is allowed
	Limiter *authlimit.Limiter // wrong guesses per source; shared with RESP's AUTH
}

// NewAuthorizer returns an Authorizer for token; a nil limiter means one of its own,
// with authlimit's defaults.
func NewAuthorizer(token string, limiter *authlimit.Limiter) *Authorizer {
	if limiter == nil {
		limiter = authlimit.New(authlimit.Config{})
	}
	return &Authorizer{Token: token, Limiter: limiter}
}

// Allow reports whether r carries the token. If not, it has answered r: 401 when the
// token is missing or wrong, 429 with Retry-After when it is wrong and r's source has
// used up its wrong guesses. A request without a bearer token is not a guess and costs
// nothing; a right token costs nothing and is never refused.
func (a *Authorizer) Allow(w http.ResponseWriter, r *http.Request) bool {
	if a.Token == "" {
		return true
	}
	scheme, guess, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	guess = strings.TrimSpace(guess)
	if !strings.EqualFold(scheme, "Bearer") || guess == "" {
		unauthorized(w)
		return false
	}
	// Constant time, so the answer's timing does not tell how much of a guess was right.
	if subtle.ConstantTimeCompare([]byte(guess), []byte(a.Token)) == 1 {
		return true
	}
	if ok, retry := a.Limiter.Wrong(authlimit.SourceString(r.RemoteAddr)); !ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(max(1, math.Ceil(retry.Seconds()))), 10))
		writeError(w, http.StatusTooManyRequests, "too many failed authentication attempts; retry later")
		return false
	}
	unauthorized(w)
	return false
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="leapcount"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
}
