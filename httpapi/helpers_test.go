package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/clocktest"
	"github.com/leapcount/leapcount/leaparray"
)

// t0 is a whole minute, so buckets of up to a minute start exactly at it.
const t0 = 1_700_000_040_000

func newClock() *clocktest.Clock { return clocktest.New(t0) }

// countingDecider passes ops on to a real Local and counts Do calls, so tests can see
// how many calls a request made.
type countingDecider struct {
	next  counter.Decider
	calls atomic.Int64
}

func (d *countingDecider) Decide(ctx context.Context, b *counter.Batch) bool {
	d.calls.Add(1)
	return d.next.Decide(ctx, b)
}

// failingDecider fails every op with err, as an unreachable owner would.
type failingDecider struct{ err error }

func (d failingDecider) Decide(_ context.Context, b *counter.Batch) bool {
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: d.err}
	}
	return true
}

// testAPI is an API server on a real socket, deciding ops with a real store.
type testAPI struct {
	t       testing.TB
	url     string
	clock   *clocktest.Clock
	decider *countingDecider
	reg     *prometheus.Registry
	handler http.Handler
}

// newAPI starts a server; edit, when not nil, changes the config before New.
func newAPI(t testing.TB, edit func(*Config)) *testAPI {
	t.Helper()
	clock := newClock()
	decider := &countingDecider{next: &counter.Local{Store: leaparray.NewStore(), Now: clock.Now}}
	reg := prometheus.NewRegistry()
	cfg := Config{
		Decider:    decider,
		Registerer: reg,
		Metrics:    promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Cluster: func() any {
			return map[string]any{"self": "n1", "members": []map[string]string{{"name": "n1", "addr": "127.0.0.1:1", "state": "alive"}}}
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testAPI{t: t, url: srv.URL, clock: clock, decider: decider, reg: reg, handler: h}
}

// reply is an answer: the status, the Content-Type and the body decoded as JSON
// (numbers kept exact).
type reply struct {
	code        int
	contentType string
	header      http.Header
	body        map[string]any
	raw         string
}

func (a *testAPI) do(method, path, body string, header ...string) reply {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatalf("NewRequest: %v", err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("reading the answer to %s %s: %v", method, path, err)
	}
	r := reply{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header, raw: string(raw)}
	if strings.HasPrefix(r.contentType, "application/json") && len(raw) > 0 && raw[0] == '{' {
		dec := json.NewDecoder(strings.NewReader(r.raw))
		dec.UseNumber()
		if err := dec.Decode(&r.body); err != nil {
			a.t.Fatalf("%s %s answered bad JSON %q: %v", method, path, raw, err)
		}
	}
	return r
}

func (a *testAPI) post(path, body string) reply {
	a.t.Helper()
	return a.do(http.MethodPost, path, body)
}
func (a *testAPI) get(path string) reply { a.t.Helper(); return a.do(http.MethodGet, path, "") }

// wantOK fails the test unless r is a 200 whose body has exactly the given fields.
// Numbers in want are compared as their decimal text.
func wantOK(t *testing.T, r reply, want map[string]any) {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("got status %d (%s); want 200", r.code, r.raw)
	}
	wantBody(t, r.body, want)
}

func wantBody(t *testing.T, got, want map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got fields %v; want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || jsonText(g) != jsonText(w) {
			t.Fatalf("field %s: got %v; want %v (body %v)", k, g, w, got)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// wantError fails the test unless r is a JSON error with the given status whose
// message contains every one of parts.
func wantError(t *testing.T, r reply, code int, parts ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("got status %d (%s); want %d", r.code, r.raw, code)
	}
	if !strings.HasPrefix(r.contentType, "application/json") {
		t.Fatalf("got Content-Type %q; want application/json", r.contentType)
	}
	msg, ok := r.body["error"].(string)
	if !ok || len(r.body) != 1 || msg == "" {
		t.Fatalf("got body %s; want {\"error\":\"...\"}", r.raw)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Fatalf("got error %q; want it to mention %q", msg, p)
		}
	}
}

// wantStillServes checks that the server answers a good request, after a bad one.
func (a *testAPI) wantStillServes() {
	a.t.Helper()
	r := a.post("/v1/incr", `{"key":"still-serves","window":"1s"}`)
	if r.code != http.StatusOK {
		a.t.Fatalf("after a bad request, a good one got status %d (%s); want 200", r.code, r.raw)
	}
}

var errOwnerDown = fmt.Errorf("%w: owner n2 unreachable", counter.ErrUnavailable)
