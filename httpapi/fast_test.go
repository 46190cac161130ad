package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// parseBoth parses body as an op of kind through the hand parser (when it takes the
// body) and through encoding/json.
func parseBoth(body []byte, kind counter.Kind) (fast, slow string, took bool) {
	show := func(op counter.Op, err error) string { return fmt.Sprintf("%+v / %v", op, err) }
	slow = show(parseOpBody(bytes.NewReader(body), kind, counter.Limits{}))
	var f opFields
	if !scanFlat(body, &f) || f.Op != nil {
		return "", slow, false
	}
	return show(f.toOp(kind, counter.Limits{})), slow, true
}

// The hand parser reads every body it takes as encoding/json does: the same op, or
// the same error.
func FuzzFastOpMatchesDecoder(f *testing.F) {
	for _, s := range []string{
		`{"key":"a","window":"60s"}`, ` { "key" : "a" , "window" : 60000 , "n" : 3 } `,
		`{"key":"a","window":"1m","limit":4611686018427387904,"buckets":60}`, `{"key":"a","window":"1m","n":-0}`,
		`{"key":"a","key":"b","window":"1m"}`, `{"Key":"a","window":"1m"}`, `{"key":"a","window":"1m","n":01}`,
		`{"key":"a\u0041","window":"1m"}`, `{"key":"é","window":"1m"}`, `{"key":1,"window":"1m"}`, `{}`, `{"key":"a"`,
		`{"key":"a","window":"1m"} x`, `{"key":"a","window":"1m","limit":"5"}`, `{"key":"a","window":"1m","n":99999999999999999999}`,
	} {
		f.Add(byte(1), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		k := counter.Kind(kind%4 + 1)
		if fast, slow, took := parseBoth(body, k); took && fast != slow {
			t.Fatalf("body %q as %v:\nhand parser:   %s\nencoding/json: %s", body, k, fast, slow)
		}
	})
}

// The hand parser takes the bodies clients send most (so the benchmark's gain is
// real) and declines what it cannot read exactly.
func TestFastOpTakesPlainBodies(t *testing.T) {
	for body, want := range map[string]bool{
		`{"key":"user:42","window":"1m","limit":100}`: true,
		`{"key":"user:42","window":60000,"n":2}`:      true,
		`{"key":"a\"b","window":"1m"}`:                false,
		`{"key":"a","window":"1m","n":1.5}`:           false,
		`{"key":"a","window":null}`:                   false,
	} {
		var f opFields
		if got := scanFlat([]byte(body), &f); got != want {
			t.Errorf("scanFlat(%s): got %v; want %v", body, got, want)
		}
	}
}

// The hand-written answer is byte for byte what encoding/json writes, for random
// results and keys (seed printed).
func TestFastAnswerMatchesEncoder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	keys := []string{"a", "user:42", "a<b", "é", "q\"", "tab\t", "x&y", "\x7f"}
	for i := 0; i < 2000; i++ {
		op := counter.Op{Kind: counter.Kind(rng.IntN(4) + 1), Key: keys[rng.IntN(len(keys))]}
		res := counter.Result{Count: rng.Int64() - rng.Int64(), Allowed: rng.IntN(2) == 0, Remaining: rng.Int64N(1 << 62),
			RetryAfterMs: rng.Int64N(1<<40) - 1, Existed: rng.IntN(2) == 0, Sliced: rng.IntN(3) == 0}
		if rng.IntN(8) == 0 {
			res.Undecided = fmt.Errorf("%w: owner of %q <gone>", counter.ErrUnavailable, op.Key)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(render(&op, &res)); err != nil {
			t.Fatal(err)
		}
		if got, ok := appendAnswer(nil, &op, &res); ok && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("answer to %+v, %+v:\ngot  %s\nwant %s", op, res, got, want.Bytes())
		} else if !ok && plainKey(op.Key) && res.Undecided == nil {
			t.Fatalf("appendAnswer declined plain key %q", op.Key)
		}
	}
}
