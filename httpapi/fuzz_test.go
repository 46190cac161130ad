package httpapi

import (
	"bytes"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

// FuzzParseOp feeds request bodies to the op parsers: kind%5 picks the endpoint
// (0: a /v1/batch op, else the Kind of /v1/incr, count, allow, reset). Parsing must
// never panic, every error must be bad input (400), and an op that parses must pass
// Validate as the kind it was parsed for.
func FuzzParseOp(f *testing.F) {
	f.Add(byte(1), []byte(`{"key":"a","window":"60s"}`))
	f.Add(byte(3), []byte(`{"key":"a","window":60000,"buckets":60,"limit":4611686018427387904,"n":2147483647}`))
	f.Add(byte(0), []byte(`{"op":"reset","key":"a","window":"1h"}`))
	f.Add(byte(1), []byte(`{"key":"a","window":6e4,"n":1.0}`))
	f.Add(byte(1), []byte(`{"key":"a","window":1e-999999999}`))
	limits := counter.Limits{}
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		want := counter.Kind(kind % 5)
		var (
			op  counter.Op
			err error
		)
		if want == 0 {
			op, err = parseBatchOp(body, limits)
		} else {
			op, err = parseOpBody(bytes.NewReader(body), want, limits)
		}
		if err != nil {
			if !counter.IsBadInput(err) {
				t.Fatalf("parse error %q is not bad input", err)
			}
			return
		}
		if verr := limits.Validate(&op); verr != nil {
			t.Fatalf("parsed op %+v does not validate: %v", op, verr)
		}
		if want != 0 && op.Kind != want {
			t.Fatalf("got kind %v; want %v", op.Kind, want)
		}
	})
}
