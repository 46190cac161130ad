package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

func TestBadBodiesAre400(t *testing.T) {
	a := newAPI(t, nil)
	long := strings.Repeat("k", counter.DefaultMaxKeyBytes+1)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/incr", ``, "body is empty"},
		{"/v1/incr", `{`, "not valid JSON"},
		{"/v1/incr", `not json`, "not valid JSON"},
		{"/v1/incr", `[1]`, "want a JSON object"},
		{"/v1/incr", `"key"`, "want a JSON object"},
		{"/v1/incr", `{"window":"1m"}`, "missing field key"},
		{"/v1/incr", `{"key":"a"}`, "missing field window"},
		{"/v1/incr", `{"key":"a","window":null}`, "missing field window"},
		{"/v1/incr", `{"key":"","window":"1m"}`, "key is empty"},
		{"/v1/incr", `{"key":"` + long + `","window":"1m"}`, "key is too long"},
		{"/v1/incr", `{"key":5,"window":"1m"}`, "field key: want a string"},
		{"/v1/incr", `{"key":"a","window":"1x"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":""}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":"1.5ms"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":"0s"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":"-1s"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":"745h"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":"31d"}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":0}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":-60000}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":2678400001}`, "invalid window"},
		{"/v1/incr", `{"key":"a","window":1.5}`, "want a whole number, got 1.5"},
		{"/v1/incr", `{"key":"a","window":true}`, "want a whole number, got a boolean"},
		{"/v1/incr", `{"key":"a","window":{}}`, "want a whole number, got an object"},
		{"/v1/incr", `{"key":"a","window":"10s","buckets":3}`, "does not divide evenly"},
		{"/v1/incr", `{"key":"a","window":"10s","buckets":0}`, "invalid buckets"},
		{"/v1/incr", `{"key":"a","window":"1h","buckets":3601}`, "invalid buckets"},
		{"/v1/incr", `{"key":"a","window":"1h","buckets":-1}`, "invalid buckets"},
		{"/v1/incr", `{"key":"a","window":"1h","buckets":"10"}`, "invalid buckets: want a whole number, got a string"},
		{"/v1/incr", `{"key":"a","window":"1h","buckets":2.5}`, "invalid buckets"},
		{"/v1/incr", `{"key":"a","window":"1h","buckets":99999999999999999999}`, "invalid buckets"},
		{"/v1/incr", `{"key":"a","window":"1m","n":0}`, "invalid n"},
		{"/v1/incr", `{"key":"a","window":"1m","n":-1}`, "invalid n"},
		{"/v1/incr", `{"key":"a","window":"1m","n":2147483648}`, "invalid n"},
		{"/v1/incr", `{"key":"a","window":"1m","n":1.5}`, "invalid n: want a whole number"},
		{"/v1/incr", `{"key":"a","window":"1m","n":"1"}`, "invalid n: want a whole number, got a string"},
		{"/v1/incr", `{"key":"a","window":"1m","n":1e400}`, "invalid n"},
		{"/v1/incr", `{"key":"a","window":"1m","n":99999999999999999999}`, "invalid n"},
		{"/v1/incr", `{"key":"a","window":"1m","foo":1}`, `unknown field "foo"`},
		{"/v1/incr", `{"key":"a","window":"1m"} x`, "unexpected data after the JSON object"},
		{"/v1/incr", `{"key":"a","window":"1m"}{}`, "unexpected data after the JSON object"},
		{"/v1/incr", `{"op":"incr","key":"a","window":"1m"}`, "field op belongs in /v1/batch"},
		{"/v1/incr", `{"key":"a","window":"1m","limit":5}`, "field limit does not apply to incr"},
		{"/v1/allow", `{"key":"a","window":"1m"}`, "missing field limit"},
		{"/v1/allow", `{"key":"a","window":"1m","limit":-1}`, "invalid limit"},
		{"/v1/allow", fmt.Sprintf(`{"key":"a","window":"1m","limit":%d}`, int64(counter.MaxLimit)+1), "invalid limit"},
		{"/v1/allow", `{"key":"a","window":"1m","limit":"5"}`, "invalid limit: want a whole number, got a string"},
		{"/v1/allow", `{"key":"a","window":"1m","limit":5,"n":0}`, "invalid n"},
		{"/v1/reset", `{"key":"a","window":"1m","n":2}`, "field n does not apply to reset"},
		{"/v1/reset", `{"key":"a","window":"1m","limit":2}`, "field limit does not apply to reset"},
	} {
		wantError(t, a.post(tc.path, tc.body), http.StatusBadRequest, tc.want)
		a.wantStillServes()
	}
}

func TestBadCountQueriesAre400(t *testing.T) {
	a := newAPI(t, nil)
	for _, tc := range []struct{ query, want string }{
		{"", "missing query parameter key"},
		{"window=1m", "missing query parameter key"},
		{"key=a", "missing query parameter window"},
		{"key=&window=1m", "key is empty"},
		{"key=a&window=1y", "invalid window"},
		{"key=a&window=0", "invalid window"},
		{"key=a&window=1m&buckets=x", `buckets "x" is not a whole number`},
		{"key=a&window=1m&buckets=0", "invalid buckets"},
		{"key=a&window=1m&buckets=7", "does not divide evenly"},
		{"key=a&window=1m&n=1", `unknown query parameter "n"`},
		{"key=a&key=b&window=1m", "key given 2 times"},
		{"key=%zz&window=1m", "malformed query string"},
	} {
		wantError(t, a.get("/v1/count?"+tc.query), http.StatusBadRequest, tc.want)
		a.wantStillServes()
	}
}

func TestBodyOverTheCapIs413(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.MaxBodyBytes = 100 })
	fits := `{"key":"a","window":"1m"}`
	fits += strings.Repeat(" ", 100-len(fits))
	wantOK(t, a.post("/v1/incr", fits), map[string]any{"key": "a", "count": 1})
	for _, body := range []string{
		fits + " ", // over the cap only in its trailing white space
		`{"key":"` + strings.Repeat("a", 200) + `","window":"1m"}`,
	} {
		wantError(t, a.post("/v1/incr", body), http.StatusRequestEntityTooLarge, "larger than 100 bytes")
		a.wantStillServes()
	}
	wantError(t, a.post("/v1/batch", batchOf(5)), http.StatusRequestEntityTooLarge, "larger than 100 bytes")
	a.wantStillServes()
}

func TestDefaultBodyCapIsOneMiB(t *testing.T) {
	a := newAPI(t, nil)
	body := `{"key":"a","window":"1m"}` + strings.Repeat(" ", DefaultMaxBodyBytes)
	wantError(t, a.post("/v1/incr", body), http.StatusRequestEntityTooLarge, "larger than 1048576 bytes")
	a.wantStillServes()
}

func TestServiceFailuresAre503(t *testing.T) {
	for _, err := range []error{
		errOwnerDown,
		fmt.Errorf("%w: draining", counter.ErrShuttingDown),
		fmt.Errorf("%w: this node holds its most counters", counter.ErrFull),
		context.DeadlineExceeded,
	} {
		a := newAPI(t, func(c *Config) { c.Decider = failingDecider{err: err} })
		wantError(t, a.post("/v1/incr", `{"key":"a","window":"1m"}`), http.StatusServiceUnavailable, err.Error())
		wantError(t, a.get("/v1/count?key=a&window=1m"), http.StatusServiceUnavailable, err.Error())
		wantError(t, a.post("/v1/allow", `{"key":"a","window":"1m","limit":1}`), http.StatusServiceUnavailable, err.Error())
		wantError(t, a.post("/v1/reset", `{"key":"a","window":"1m"}`), http.StatusServiceUnavailable, err.Error())
	}
}

func TestBadInputFromTheDeciderIs400(t *testing.T) {
	// A Decider may reject an op that passed the parser (a cluster router applying its own
	// limits, say); that is still the client's fault.
	a := newAPI(t, func(c *Config) {
		c.Decider = failingDecider{err: fmt.Errorf("%w: key is reserved", counter.ErrBadArgument)}
	})
	wantError(t, a.post("/v1/incr", `{"key":"a","window":"1m"}`), http.StatusBadRequest, "key is reserved")
}
