package httpapi

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/leaparray"
)

func TestUnknownPathIs404(t *testing.T) {
	a := newAPI(t, nil)
	for _, path := range []string{"/", "/v1", "/v1/incr/", "/v1/decr", "/V1/INCR", "/healthz/x"} {
		wantError(t, a.post(path, `{}`), http.StatusNotFound, "no such path")
		wantError(t, a.get(path), http.StatusNotFound, "no such path")
	}
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	a := newAPI(t, nil)
	for path, allow := range map[string]string{
		"/v1/incr": "POST", "/v1/allow": "POST", "/v1/reset": "POST", "/v1/batch": "POST",
		"/v1/count": "GET, HEAD", "/v1/cluster": "GET, HEAD", "/healthz": "GET, HEAD",
		"/readyz": "GET, HEAD", "/metrics": "GET, HEAD",
	} {
		wrong := http.MethodGet
		if allow != "POST" {
			wrong = http.MethodPost
		}
		for _, method := range []string{wrong, http.MethodPut, http.MethodDelete} {
			r := a.do(method, path, "")
			wantError(t, r, http.StatusMethodNotAllowed, "not allowed")
			if got := r.header.Get("Allow"); got != allow {
				t.Fatalf("%s %s: got Allow %q; want %q", method, path, got, allow)
			}
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var ready atomic.Bool
	a := newAPI(t, func(c *Config) { c.Ready = ready.Load })
	wantOK(t, a.get("/healthz"), map[string]any{"status": "ok"})
	wantError(t, a.get("/readyz"), http.StatusServiceUnavailable, "not ready")
	ready.Store(true)
	wantOK(t, a.get("/readyz"), map[string]any{"status": "ready"})
	ready.Store(false) // shutting down
	wantError(t, a.get("/readyz"), http.StatusServiceUnavailable, "not ready")
	if r := a.do(http.MethodHead, "/healthz", ""); r.code != http.StatusOK || r.raw != "" {
		t.Fatalf("HEAD /healthz: got %d %q; want 200 and no body", r.code, r.raw)
	}
}

func TestReadyWithoutReadyFunc(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.Ready = nil })
	wantOK(t, a.get("/readyz"), map[string]any{"status": "ready"})
}

func TestClusterIsWhatClusterReturns(t *testing.T) {
	a := newAPI(t, nil)
	r := a.get("/v1/cluster")
	if r.code != http.StatusOK {
		t.Fatalf("got status %d; want 200", r.code)
	}
	want := `{"members":[{"addr":"127.0.0.1:1","name":"n1","state":"alive"}],"self":"n1"}` + "\n"
	if r.raw != want {
		t.Fatalf("got %s; want %s", r.raw, want)
	}
}

func TestOptionalRoutesAbsent(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.Cluster, c.Metrics = nil, nil })
	wantError(t, a.get("/v1/cluster"), http.StatusNotFound, "no such path")
	wantError(t, a.get("/metrics"), http.StatusNotFound, "no such path")
}

func TestTokenGuardsAPIAndMetrics(t *testing.T) {
	// A budget for every wrong guess below (TestWrongTokensAreLimited tests the limit).
	limiter := authlimit.New(authlimit.Config{Burst: 100})
	a := newAPI(t, func(c *Config) { c.Token, c.AuthLimiter = "s3cret", limiter })
	guarded := []struct{ method, path, body string }{
		{"POST", "/v1/incr", `{"key":"a","window":"1m"}`},
		{"GET", "/v1/count?key=a&window=1m", ""},
		{"POST", "/v1/allow", `{"key":"a","window":"1m","limit":5}`},
		{"POST", "/v1/reset", `{"key":"a","window":"1m"}`},
		{"POST", "/v1/batch", `{"ops":[]}`},
		{"GET", "/v1/cluster", ""},
		{"GET", "/metrics", ""},
	}
	for _, g := range guarded {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer"} {
			r := a.do(g.method, g.path, g.body, "Authorization", auth)
			wantError(t, r, http.StatusUnauthorized, "bearer token")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatalf("%s %s: 401 without WWW-Authenticate", g.method, g.path)
			}
		}
		for _, auth := range []string{"Bearer s3cret", "bearer s3cret"} {
			if r := a.do(g.method, g.path, g.body, "Authorization", auth); r.code != http.StatusOK {
				t.Fatalf("%s %s with %q: got %d (%s); want 200", g.method, g.path, auth, r.code, r.raw)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := a.get(path); r.code != http.StatusOK {
			t.Fatalf("GET %s without a token: got %d; want 200", path, r.code)
		}
	}
}

func TestWrongTokensAreLimited(t *testing.T) {
	clock := newClock()
	limiter := authlimit.New(authlimit.Config{Burst: 3, Every: 90 * time.Second,
		Now: func() time.Time { return time.UnixMilli(clock.Now()) }})
	a := newAPI(t, func(c *Config) { c.Token, c.AuthLimiter = "s3cret", limiter })
	const incr = `{"key":"a","window":"1m"}`
	for range 5 { // right tokens cost nothing, and no token is not a guess
		if r := a.do("POST", "/v1/incr", incr, "Authorization", "Bearer s3cret"); r.code != http.StatusOK {
			t.Fatalf("right token: got %d (%s); want 200", r.code, r.raw)
		}
		wantError(t, a.post("/v1/incr", incr), http.StatusUnauthorized, "bearer token")
	}
	for range 3 {
		wantError(t, a.do("POST", "/v1/incr", incr, "Authorization", "Bearer wrong"), http.StatusUnauthorized, "bearer token")
	}
	for range 2 { // over budget: a wrong token is "too many"
		r := a.do("GET", "/v1/count?key=a&window=1m", "", "Authorization", "Bearer wrong")
		wantError(t, r, http.StatusTooManyRequests, "too many failed authentication attempts")
		if got := r.header.Get("Retry-After"); got != "90" {
			t.Fatalf("Retry-After: got %q; want 90", got)
		}
		// The right token is never refused (before, it was refused unchecked).
		if r := a.do("GET", "/v1/count?key=a&window=1m", "", "Authorization", "Bearer s3cret"); r.code != http.StatusOK {
			t.Fatalf("over budget, the right token: got %d (%s); want 200", r.code, r.raw)
		}
	}
	if r := a.get("/healthz"); r.code != http.StatusOK {
		t.Fatalf("GET /healthz while limited: got %d; want 200", r.code)
	}
	clock.Advance(90_000)
	wantError(t, a.do("POST", "/v1/incr", incr, "Authorization", "Bearer wrong"), http.StatusUnauthorized, "bearer token")
}

func TestMetricsCountRequests(t *testing.T) {
	a := newAPI(t, nil)
	a.post("/v1/incr", `{"key":"a","window":"1m"}`)
	a.post("/v1/incr", `{"key":"a","window":"1m"}`)
	a.post("/v1/incr", `{}`)
	a.get("/random/path")
	r := a.get("/metrics")
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics: got %d; want 200", r.code)
	}
	for _, line := range []string{
		`leapcount_http_requests_total{code="200",route="incr"} 2`,
		`leapcount_http_requests_total{code="400",route="incr"} 1`,
		`leapcount_http_requests_total{code="404",route="unknown"} 1`,
		`leapcount_http_request_duration_seconds_count{route="incr"} 3`,
	} {
		if !strings.Contains(r.raw, line+"\n") {
			t.Fatalf("metrics lack %q:\n%s", line, r.raw)
		}
	}
}

func TestNewRejectsADoubleRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Decider: &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now}, Registerer: reg}
	if _, err := New(cfg); err != nil {
		t.Fatalf("first New: %v", err)
	}
	if _, err := New(cfg); err == nil {
		t.Fatalf("second New on the same registry: got no error; want one")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatalf("New without a Decider: got no error; want one")
	}
}
