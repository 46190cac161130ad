package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

// results returns the "results" array of a batch answer, each as a JSON object.
func results(t *testing.T, r reply) []map[string]any {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("got status %d (%s); want 200", r.code, r.raw)
	}
	var body struct{ Results []map[string]any }
	dec := json.NewDecoder(strings.NewReader(r.raw))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("batch answer %q: %v", r.raw, err)
	}
	if len(r.body) != 1 || body.Results == nil {
		t.Fatalf("got body %s; want only a results array", r.raw)
	}
	return body.Results
}

func TestBatchAnswersEveryOpInOrder(t *testing.T) {
	a := newAPI(t, nil)
	calls := a.decider.calls.Load()
	got := results(t, a.post("/v1/batch", `{"ops":[
		{"op":"incr","key":"b","window":"1m"},
		{"op":"INCR","key":"b","window":60000,"n":4},
		{"op":"count","key":"b","window":"1m"},
		{"op":"decr","key":"b","window":"1m"},
		{"op":"allow","key":"b","window":"1m","limit":6},
		{"op":"allow","key":"b","window":"1m","limit":6},
		{"op":"incr","key":"","window":"1m"},
		{"op":"reset","key":"b","window":"1m"},
		{"op":"reset","key":"b","window":"1m"},
		{"op":"count","key":"b","window":"1m"}
	]}`))
	if n := a.decider.calls.Load() - calls; n != 1 {
		t.Fatalf("got %d Do calls for one batch; want 1", n)
	}
	want := []map[string]any{
		{"key": "b", "count": 1},
		{"key": "b", "count": 5},
		{"key": "b", "count": 5},
		{"error": `unknown op "decr": want incr, count, allow or reset`},
		{"key": "b", "allowed": true, "count": 6, "remaining": 0, "retry_after_ms": 0},
		{"key": "b", "allowed": false, "count": 6, "remaining": 0, "retry_after_ms": 60_000},
		{"error": "key is empty"},
		{"key": "b", "existed": true},
		{"key": "b", "existed": false},
		{"key": "b", "count": 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results; want %d", len(got), len(want))
	}
	for i := range want {
		wantBody(t, got[i], want[i])
	}
}

func TestBatchBadOpsAnswerInPlace(t *testing.T) {
	a := newAPI(t, nil)
	got := results(t, a.post("/v1/batch", `{"ops":[
		{"key":"x","window":"1m"},
		{"op":"incr","key":"x","window":"1m","color":"red"},
		{"op":"count","key":"x","window":"1m","n":2},
		{"op":"incr","key":"x","window":"1m","buckets":7},
		null,
		5,
		{"op":"incr","key":"x","window":"1m"}
	]}`))
	wantParts := [][]string{{"missing field op"}, {`unknown field "color"`}, {"n does not apply to count"},
		{"invalid buckets"}, {"missing field op"}, {"want a JSON object"}, nil}
	for i, parts := range wantParts {
		msg, isErr := got[i]["error"].(string)
		if parts == nil {
			wantBody(t, got[i], map[string]any{"key": "x", "count": 1})
			continue
		}
		if !isErr {
			t.Fatalf("result %d: got %v; want an error", i, got[i])
		}
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Fatalf("result %d: got error %q; want it to mention %q", i, msg, p)
			}
		}
	}
}

func TestBatchSizes(t *testing.T) {
	a := newAPI(t, nil)
	if got := results(t, a.post("/v1/batch", `{"ops":[]}`)); len(got) != 0 {
		t.Fatalf("got %d results for no ops; want 0", len(got))
	}
	full := batchOf(counter.MaxBatch)
	got := results(t, a.post("/v1/batch", full))
	if len(got) != counter.MaxBatch {
		t.Fatalf("got %d results; want %d", len(got), counter.MaxBatch)
	}
	wantBody(t, got[counter.MaxBatch-1], map[string]any{"key": "many", "count": counter.MaxBatch})
	wantError(t, a.post("/v1/batch", batchOf(counter.MaxBatch+1)), http.StatusBadRequest, "1001 ops, at most 1000")
	a.wantStillServes()
}

func batchOf(n int) string {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = `{"op":"incr","key":"many","window":"1m"}`
	}
	return `{"ops":[` + strings.Join(ops, ",") + `]}`
}

func TestBatchBadRequests(t *testing.T) {
	a := newAPI(t, nil)
	for _, tc := range []struct{ body, want string }{
		{``, "body is empty"},
		{`{}`, "missing field ops"},
		{`{"ops":null}`, "missing field ops"},
		{`{"ops":{}}`, "field ops: want an array"},
		{`{"ops":[],"more":1}`, `unknown field "more"`},
		{`{"ops":[]} {}`, "unexpected data after the JSON object"},
		{`{"ops":[`, "not valid JSON"},
		{`[]`, "want a JSON object"},
	} {
		wantError(t, a.post("/v1/batch", tc.body), http.StatusBadRequest, tc.want)
		a.wantStillServes()
	}
}

func TestBatchUnavailableOwnerAnswersInPlace(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.Decider = failingDecider{err: errOwnerDown} })
	got := results(t, a.post("/v1/batch", `{"ops":[{"op":"incr","key":"x","window":"1m"},{"op":"bad"}]}`))
	wantBody(t, got[0], map[string]any{"error": "counter unavailable: owner n2 unreachable"})
	if _, ok := got[1]["error"]; !ok {
		t.Fatalf("got %v for a bad op; want an error", got[1])
	}
}
