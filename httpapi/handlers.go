package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/leapcount/leapcount/counter"
)

// opHandler answers POST /v1/incr, /v1/allow and /v1/reset.
func (s *server) opHandler(kind counter.Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, err := readOpBody(r, kind, s.cfg.Limits)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.decideOne(w, r, op)
	})
}

// handleCount answers GET /v1/count?key=&window=&buckets=.
func (s *server) handleCount(w http.ResponseWriter, r *http.Request) {
	op, err := parseCountQuery(r.URL.RawQuery, s.cfg.Limits)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.decideOne(w, r, op)
}

func (s *server) decideOne(w http.ResponseWriter, r *http.Request, op counter.Op) {
	ops := []counter.Op{op}
	results := make([]counter.Result, 1)
	counter.Do(r.Context(), s.cfg.Decider, ops, results)
	if err := results[0].Err; err != nil {
		s.fail(w, r, err)
		return
	}
	if op.Kind == counter.Allow {
		setRateLimitHeaders(w.Header(), &ops[0], &results[0])
		if policy := failPolicy(&results[0]); policy != "" {
			w.Header()["Leapcount-Fail-Policy"] = []string{policy}
		}
	}
	bp := answerPool.Get().(*[]byte)
	defer answerPool.Put(bp)
	if b, ok := appendAnswer((*bp)[:0], &ops[0], &results[0]); ok {
		*bp = b
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b) // an error means the client went away
		return
	}
	writeJSON(w, http.StatusOK, render(&ops[0], &results[0]))
}

// jsonContentType is shared by every answer: net/http only reads it.
var jsonContentType = []string{"application/json"}

var answerPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

type batchRequest struct {
	Ops []json.RawMessage `json:"ops"`
}

type batchResponse struct {
	Results []any `json:"results"`
}

// handleBatch answers POST /v1/batch: the valid ops go to the Decider in one call, and
// each invalid one gets its error in its place among the results.
func (s *server) handleBatch(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Ops == nil {
		s.fail(w, r, fmt.Errorf("%w: missing field ops", counter.ErrBadArgument))
		return
	}
	if len(req.Ops) > counter.MaxBatch {
		s.fail(w, r, fmt.Errorf("%w: batch has %d ops, at most %d", counter.ErrBadArgument, len(req.Ops), counter.MaxBatch))
		return
	}
	answers := make([]any, len(req.Ops))
	ops := make([]counter.Op, 0, len(req.Ops))
	index := make([]int, 0, len(req.Ops)) // index[i]: the place of ops[i] in the request
	for i, raw := range req.Ops {
		op, err := parseBatchOp(raw, s.cfg.Limits)
		if err != nil {
			answers[i] = errorResponse{Error: err.Error()}
			continue
		}
		ops = append(ops, op)
		index = append(index, i)
	}
	if len(ops) > 0 {
		results := make([]counter.Result, len(ops))
		counter.Do(r.Context(), s.cfg.Decider, ops, results)
		for j := range ops {
			answers[index[j]] = s.batchAnswer(r, &ops[j], &results[j])
		}
	}
	writeJSON(w, http.StatusOK, batchResponse{Results: answers})
}

func (s *server) batchAnswer(r *http.Request, op *counter.Op, res *counter.Result) any {
	if res.Err != nil {
		s.logFailure(r, res.Err)
		s.opErrs.Note(res.Err)
		return errorResponse{Error: res.Err.Error()}
	}
	return render(op, res)
}

type countResponse struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// allowResponse is an allow's answer. FailPolicy and Reason are set, and only then
// written, on an answer of the fail policy (counter.Result.Undecided), so that clients
// can tell it from a decision.
type allowResponse struct {
	Key          string `json:"key"`
	Allowed      bool   `json:"allowed"`
	Count        int64  `json:"count"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	FailPolicy   string `json:"fail_policy,omitempty"` // "open" or "closed"
	Reason       string `json:"reason,omitempty"`      // why the allow was not decided
	// Sliced: decided by the node asked, from a slice of the limit its owner lent it;
	// count and remaining are that node's estimate (counter.Result.Sliced).
	Sliced bool `json:"sliced,omitempty"`
}

// failPolicy names the fail policy that answered res ("open" or "closed"), or is ""
// for a decision.
func failPolicy(res *counter.Result) string {
	switch {
	case res.Undecided == nil:
		return ""
	case res.Allowed:
		return "open"
	}
	return "closed"
}

type resetResponse struct {
	Key     string `json:"key"`
	Existed bool   `json:"existed"`
}

type errorResponse struct {
	Error string `json:"error"`
}

type statusResponse struct {
	Status string `json:"status"`
}

// render is the JSON answer to a decided op.
func render(op *counter.Op, res *counter.Result) any {
	switch op.Kind {
	case counter.Allow:
		a := allowResponse{Key: op.Key, Allowed: res.Allowed, Count: res.Count,
			Remaining: res.Remaining, RetryAfterMs: res.RetryAfterMs, FailPolicy: failPolicy(res), Sliced: res.Sliced}
		if res.Undecided != nil {
			a.Reason = res.Undecided.Error()
		}
		return a
	case counter.Reset:
		return resetResponse{Key: op.Key, Existed: res.Existed}
	}
	return countResponse{Key: op.Key, Count: res.Count}
}

// fail answers err with its status: 413 for a body over the cap, 408 for one not
// received in time, 400 for bad input, 503 for everything else (the service, not the
// request, is at fault: unavailable, stopping, or full).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, errBodyTimeout):
		writeError(w, http.StatusRequestTimeout, err.Error())
	case counter.IsBadInput(err):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		s.logFailure(r, err)
		s.opErrs.Note(err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// logFailure logs a failure of the service at Debug level: when an owner is down
// every request fails, and the 503s are counted in the metrics.
func (s *server) logFailure(r *http.Request, err error) {
	s.log.Debug("operation failed", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// An error here means the client went away; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
