package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/leapcount/leapcount/counter"
)

// opFields is the JSON form of one op. Numbers stay raw so they are read exactly, and
// so that a window can be a string ("60s") or a number of milliseconds.
type opFields struct {
	Op      *string         `json:"op"` // only in a /v1/batch op
	Key     *string         `json:"key"`
	Window  json.RawMessage `json:"window"`
	Buckets json.RawMessage `json:"buckets"`
	N       json.RawMessage `json:"n"`
	Limit   json.RawMessage `json:"limit"`
}

// parseOpBody reads the body of POST /v1/incr, /v1/allow or /v1/reset as an op of kind.
func parseOpBody(body io.Reader, kind counter.Kind, limits counter.Limits) (counter.Op, error) {
	var f opFields
	if err := decodeStrict(body, &f); err != nil {
		return counter.Op{}, err
	}
	if f.Op != nil {
		return counter.Op{}, fmt.Errorf("%w: field op belongs in /v1/batch ops only", counter.ErrBadArgument)
	}
	return f.toOp(kind, limits)
}

// parseBatchOp reads one element of a /v1/batch "ops" array, whose "op" field names
// the kind.
func parseBatchOp(raw json.RawMessage, limits counter.Limits) (counter.Op, error) {
	var f opFields
	if err := decodeStrict(bytes.NewReader(raw), &f); err != nil {
		return counter.Op{}, err
	}
	if f.Op == nil {
		return counter.Op{}, fmt.Errorf("%w: missing field op", counter.ErrBadArgument)
	}
	kind, err := counter.ParseKind(*f.Op)
	if err != nil {
		return counter.Op{}, err
	}
	return f.toOp(kind, limits)
}

// toOp checks the fields against kind, fills the defaults and validates the op.
func (f *opFields) toOp(kind counter.Kind, limits counter.Limits) (counter.Op, error) {
	op := counter.Op{Kind: kind, Buckets: counter.DefaultBuckets, N: 1}
	if f.Key == nil {
		return op, fmt.Errorf("%w: missing field key", counter.ErrBadArgument)
	}
	op.Key = *f.Key
	if isAbsent(f.Window) {
		return op, fmt.Errorf("%w: missing field window", counter.ErrBadArgument)
	}
	var err error
	if op.Window, err = windowOf(f.Window); err != nil {
		return op, err
	}
	if !isAbsent(f.Buckets) {
		b, err := wholeNumber(counter.ErrBadBuckets, f.Buckets)
		if err == nil {
			op.Buckets, err = bucketsOf(b)
		}
		if err != nil {
			return op, err
		}
	}
	if err := f.readN(&op); err != nil {
		return op, err
	}
	if err := f.readLimit(&op); err != nil {
		return op, err
	}
	return op, limits.Check(&op)
}

func (f *opFields) readN(op *counter.Op) error {
	if isAbsent(f.N) {
		return nil
	}
	if op.Kind != counter.Incr && op.Kind != counter.Allow {
		return fmt.Errorf("%w: field n does not apply to %v", counter.ErrBadArgument, op.Kind)
	}
	var err error
	op.N, err = wholeNumber(counter.ErrBadN, f.N)
	return err
}

func (f *opFields) readLimit(op *counter.Op) error {
	switch {
	case op.Kind != counter.Allow && isAbsent(f.Limit):
		return nil
	case op.Kind != counter.Allow:
		return fmt.Errorf("%w: field limit does not apply to %v", counter.ErrBadArgument, op.Kind)
	case isAbsent(f.Limit):
		return fmt.Errorf("%w: missing field limit", counter.ErrBadLimit)
	}
	var err error
	op.Limit, err = wholeNumber(counter.ErrBadLimit, f.Limit)
	return err
}

// windowOf reads a window given as a string ("60s", "60000") or a number of ms.
func windowOf(raw json.RawMessage) (int64, error) {
	if raw[0] == '"' {
		if s, _, ok := plainString(raw, 0); ok && len(s) == len(raw)-2 {
			return counter.ParseWindow(string(s)) // no escapes: the bytes are the string
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: %v", counter.ErrBadWindow, err)
		}
		return counter.ParseWindow(s)
	}
	return wholeNumber(counter.ErrBadWindow, raw)
}

// bucketsOf narrows a bucket count to int, checking the range first so that no value
// wraps into a valid one where int is 32 bits.
func bucketsOf(v int64) (int, error) {
	if v < 1 || v > counter.MaxBuckets {
		return 0, fmt.Errorf("%w: must be from 1 to %d, got %d", counter.ErrBadBuckets, counter.MaxBuckets, v)
	}
	return int(v), nil
}

// countParams are the query parameters GET /v1/count takes.
var countParams = map[string]bool{"key": true, "window": true, "buckets": true}

// parseCountQuery reads GET /v1/count?key=&window=&buckets= as a count op.
func parseCountQuery(rawQuery string, limits counter.Limits) (counter.Op, error) {
	op := counter.Op{Kind: counter.Count, Buckets: counter.DefaultBuckets}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return op, fmt.Errorf("%w: malformed query string: %v", counter.ErrBadArgument, err)
	}
	for name, values := range q {
		if !countParams[name] {
			return op, fmt.Errorf("%w: unknown query parameter %q", counter.ErrBadArgument, name)
		}
		if len(values) > 1 {
			return op, fmt.Errorf("%w: query parameter %s given %d times", counter.ErrBadArgument, name, len(values))
		}
	}
	if !q.Has("key") {
		return op, fmt.Errorf("%w: missing query parameter key", counter.ErrBadArgument)
	}
	op.Key = q.Get("key")
	if !q.Has("window") {
		return op, fmt.Errorf("%w: missing query parameter window", counter.ErrBadArgument)
	}
	if op.Window, err = counter.ParseWindow(q.Get("window")); err != nil {
		return op, err
	}
	if q.Has("buckets") {
		b, err := strconv.ParseInt(q.Get("buckets"), 10, 64)
		if err != nil {
			return op, fmt.Errorf("%w: buckets %q is not a whole number", counter.ErrBadBuckets, abbreviate(q.Get("buckets")))
		}
		if op.Buckets, err = bucketsOf(b); err != nil {
			return op, err
		}
	}
	return op, limits.Check(&op)
}
