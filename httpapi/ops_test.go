package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

func TestIncrAddsAndCountReads(t *testing.T) {
	a := newAPI(t, nil)
	wantOK(t, a.post("/v1/incr", `{"key":"a","window":"10s"}`), map[string]any{"key": "a", "count": 1})
	wantOK(t, a.post("/v1/incr", `{"key":"a","window":"10s","n":5}`), map[string]any{"key": "a", "count": 6})
	wantOK(t, a.post("/v1/incr", `{"key":"a","window":10000,"buckets":10,"n":1}`), map[string]any{"key": "a", "count": 7})
	wantOK(t, a.get("/v1/count?key=a&window=10s"), map[string]any{"key": "a", "count": 7})
	wantOK(t, a.get("/v1/count?key=a&window=10000&buckets=10"), map[string]any{"key": "a", "count": 7})
}

func TestCountersDifferByWindowAndBuckets(t *testing.T) {
	a := newAPI(t, nil)
	a.post("/v1/incr", `{"key":"k","window":"10s","n":3}`)
	wantOK(t, a.post("/v1/incr", `{"key":"k","window":"20s"}`), map[string]any{"key": "k", "count": 1})
	wantOK(t, a.post("/v1/incr", `{"key":"k","window":"10s","buckets":5}`), map[string]any{"key": "k", "count": 1})
	wantOK(t, a.get("/v1/count?key=k&window=10s"), map[string]any{"key": "k", "count": 3})
	wantOK(t, a.get("/v1/count?key=other&window=10s"), map[string]any{"key": "other", "count": 0})
}

func TestCountSlidesWithTheWindow(t *testing.T) {
	a := newAPI(t, nil)
	a.post("/v1/incr", `{"key":"s","window":"10s","n":3}`) // bucket of t0
	a.clock.Advance(5_000)
	a.post("/v1/incr", `{"key":"s","window":"10s","n":2}`) // bucket of t0+5s
	wantOK(t, a.get("/v1/count?key=s&window=10s"), map[string]any{"key": "s", "count": 5})
	a.clock.Advance(4_999) // t0+9.999s: the first bucket is still the oldest in the window
	wantOK(t, a.get("/v1/count?key=s&window=10s"), map[string]any{"key": "s", "count": 5})
	a.clock.Advance(1) // t0+10s: it has left
	wantOK(t, a.get("/v1/count?key=s&window=10s"), map[string]any{"key": "s", "count": 2})
	a.clock.Advance(5_000)
	wantOK(t, a.get("/v1/count?key=s&window=10s"), map[string]any{"key": "s", "count": 0})
}

func TestCountDoesNotCreate(t *testing.T) {
	a := newAPI(t, nil)
	wantOK(t, a.get("/v1/count?key=ghost&window=1m"), map[string]any{"key": "ghost", "count": 0})
	wantOK(t, a.post("/v1/reset", `{"key":"ghost","window":"1m"}`), map[string]any{"key": "ghost", "existed": false})
}

func TestWindowForms(t *testing.T) {
	a := newAPI(t, nil)
	// Every form names the same one-minute window, so they all add to one counter.
	forms := []string{`"60s"`, `"1m"`, `"60000"`, `60000`, `6e4`, `60000.0`, `"1m0s"`, `" 60s "`}
	for i, w := range forms {
		r := a.post("/v1/incr", `{"key":"w","window":`+w+`}`)
		wantOK(t, r, map[string]any{"key": "w", "count": i + 1})
	}
	for _, w := range []string{"500ms", "1h", "744h", "1ms"} {
		wantOK(t, a.post("/v1/incr", `{"key":"w","window":"`+w+`","buckets":1}`), map[string]any{"key": "w", "count": 1})
	}
}

func TestAllowAdmitsUpToLimit(t *testing.T) {
	a := newAPI(t, nil)
	body := `{"key":"u","window":"10s","limit":3}`
	for i := 1; i <= 3; i++ {
		wantOK(t, a.post("/v1/allow", body), map[string]any{"key": "u", "allowed": true, "count": i, "remaining": 3 - i, "retry_after_ms": 0})
	}
	// All three are in the bucket of t0, which leaves the window at t0+10s.
	wantOK(t, a.post("/v1/allow", body), map[string]any{"key": "u", "allowed": false, "count": 3, "remaining": 0, "retry_after_ms": 10_000})
	a.clock.Advance(1_500)
	wantOK(t, a.post("/v1/allow", body), map[string]any{"key": "u", "allowed": false, "count": 3, "remaining": 0, "retry_after_ms": 8_500})
	a.clock.Advance(8_500)
	wantOK(t, a.post("/v1/allow", body), map[string]any{"key": "u", "allowed": true, "count": 1, "remaining": 2, "retry_after_ms": 0})
}

func TestAllowWithN(t *testing.T) {
	a := newAPI(t, nil)
	wantOK(t, a.post("/v1/allow", `{"key":"n","window":"1s","limit":10,"n":4}`),
		map[string]any{"key": "n", "allowed": true, "count": 4, "remaining": 6, "retry_after_ms": 0})
	wantOK(t, a.post("/v1/allow", `{"key":"n","window":"1s","limit":10,"n":7}`),
		map[string]any{"key": "n", "allowed": false, "count": 4, "remaining": 6, "retry_after_ms": 1_000})
	// More than the limit can ever admit: never.
	wantOK(t, a.post("/v1/allow", `{"key":"n","window":"1s","limit":10,"n":11}`),
		map[string]any{"key": "n", "allowed": false, "count": 4, "remaining": 6, "retry_after_ms": -1})
	wantOK(t, a.post("/v1/allow", `{"key":"z","window":"1s","limit":0}`),
		map[string]any{"key": "z", "allowed": false, "count": 0, "remaining": 0, "retry_after_ms": -1})
}

func TestLargeNumbersStayExact(t *testing.T) {
	a := newAPI(t, nil)
	const maxLimit = int64(counter.MaxLimit) // 2^62: beyond float64's 53 bits of mantissa
	body := fmt.Sprintf(`{"key":"big","window":"1s","limit":%d,"n":%d}`, maxLimit, counter.MaxN)
	wantOK(t, a.post("/v1/allow", body), map[string]any{"key": "big", "allowed": true, "count": counter.MaxN,
		"remaining": maxLimit - counter.MaxN, "retry_after_ms": 0})
	r := a.post("/v1/allow", body)
	if got := r.body["remaining"]; jsonText(got) != fmt.Sprint(maxLimit-2*counter.MaxN) {
		t.Fatalf("got remaining %v; want %d", got, maxLimit-2*counter.MaxN)
	}
}

func TestReset(t *testing.T) {
	a := newAPI(t, nil)
	a.post("/v1/incr", `{"key":"r","window":"1m","n":9}`)
	wantOK(t, a.post("/v1/reset", `{"key":"r","window":"1m"}`), map[string]any{"key": "r", "existed": true})
	wantOK(t, a.get("/v1/count?key=r&window=1m"), map[string]any{"key": "r", "count": 0})
	wantOK(t, a.post("/v1/reset", `{"key":"r","window":"1m"}`), map[string]any{"key": "r", "existed": false})
}

func TestKeysAreAnyBytes(t *testing.T) {
	a := newAPI(t, nil)
	for _, key := range []string{"ключ 😀", "a/b?c=d&e", " ", `quote"back\slash`, strings.Repeat("k", counter.DefaultMaxKeyBytes)} {
		body := fmt.Sprintf(`{"key":%s,"window":"1m"}`, jsonText(key))
		wantOK(t, a.post("/v1/incr", body), map[string]any{"key": key, "count": 1})
		wantOK(t, a.get("/v1/count?window=1m&key="+url.QueryEscape(key)), map[string]any{"key": key, "count": 1})
	}
}

func TestMaxKeyBytesComesFromLimits(t *testing.T) {
	limits := counter.Limits{MaxKeyBytes: 1000}
	a := newAPI(t, func(c *Config) {
		c.Limits = limits
		c.Decider = &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now, Limits: limits}
	})
	key := strings.Repeat("x", 1000)
	wantOK(t, a.post("/v1/incr", `{"key":"`+key+`","window":"1m"}`), map[string]any{"key": key, "count": 1})
	wantError(t, a.post("/v1/incr", `{"key":"`+key+`y","window":"1m"}`), http.StatusBadRequest, "key is too long")
}

func TestEveryAnswerIsJSON(t *testing.T) {
	a := newAPI(t, nil)
	for _, r := range []reply{
		a.post("/v1/incr", `{"key":"j","window":"1m"}`),
		a.get("/v1/count?key=j&window=1m"),
		a.post("/v1/allow", `{"key":"j","window":"1m","limit":1}`),
		a.post("/v1/reset", `{"key":"j","window":"1m"}`),
		a.post("/v1/batch", `{"ops":[]}`),
		a.get("/v1/cluster"),
		a.get("/healthz"),
		a.get("/readyz"),
		a.get("/nope"),
	} {
		if r.contentType != "application/json" {
			t.Fatalf("got Content-Type %q for %s; want application/json", r.contentType, r.raw)
		}
	}
}
