package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/leapcount/leapcount/counter"
)

// errBodyTimeout: the request's body did not arrive within the server's read timeout
// (a client that sends it slowly, or never finishes it). HTTP 408.
var errBodyTimeout = errors.New("request body not received within the server's read timeout")

// decodeStrict reads exactly one JSON object from r into v: unknown fields and
// anything but white space after the object are errors. Every error it returns is
// bad input (counter.IsBadInput), except a body over the size cap, which stays an
// *http.MaxBytesError so the caller can answer 413, and errBodyTimeout.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: request body is empty; want a JSON object", counter.ErrBadArgument)
		}
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if rerr := readError(err); rerr != nil {
			return rerr
		}
		return fmt.Errorf("%w: unexpected data after the JSON object", counter.ErrBadArgument)
	}
	return nil
}

// readError is the error to answer for a failure to read the body itself, or nil if
// err is not one: a body over the cap, or one that did not arrive in time.
func readError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errBodyTimeout
	}
	return nil
}

// jsonError turns an encoding/json error into a readable bad-input error that names
// the field, without Go type names in it.
func jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	if rerr := readError(err); rerr != nil {
		return rerr
	}
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: body is not valid JSON: %v (at byte %d)", counter.ErrBadArgument, syntax, syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: body is not valid JSON: it ends too early", counter.ErrBadArgument)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("%w: want a JSON object, got %s", counter.ErrBadArgument, typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("%w: field %s: want %s, got %s", counter.ErrBadArgument, typ.Field, jsonTypeOf(typ.Type), typ.Value)
	}
	// The rest (an unknown field, mostly) reads well once the package prefix is gone.
	return fmt.Errorf("%w: %s", counter.ErrBadArgument, strings.TrimPrefix(err.Error(), "json: "))
}

// jsonTypeOf names the JSON type that decodes into a Go type of the request structs.
func jsonTypeOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonTypeOf(t.Elem())
	}
	return "an object"
}

// isAbsent reports whether an optional JSON value was left out or given as null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// wholeNumber reads a JSON value that must be a whole number in int64, such as 42,
// 1e3 or 60000.0. It parses the literal exactly (never through float64), so numbers
// up to 2^62 keep every digit. Errors wrap kind, the field's bad-input sentinel.
func wholeNumber(kind error, raw json.RawMessage) (int64, error) {
	s := string(raw)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	if c := s[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("%w: want a whole number, got %s", kind, describeJSON(raw))
	}
	// A fraction or an exponent. 128 bits hold any int64 with room to spare, so an
	// inexact parse means the value has digits beyond int64 or below the point.
	f, _, err := big.ParseFloat(s, 10, 128, big.ToZero)
	if err != nil || f.Acc() != big.Exact || !f.IsInt() {
		return 0, fmt.Errorf("%w: want a whole number, got %s", kind, abbreviate(s))
	}
	v, acc := f.Int64()
	if acc != big.Exact {
		return 0, fmt.Errorf("%w: %s is out of range", kind, abbreviate(s))
	}
	return v, nil
}

// describeJSON names the type of a JSON value that is not a number.
func describeJSON(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return abbreviate(string(raw))
}

// abbreviate keeps error messages short when a client sends a huge value.
func abbreviate(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
