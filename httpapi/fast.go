package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/leapcount/leapcount/counter"
)

// The request and answer of a single op are read and written by hand when they are
// plain (a flat object of ASCII strings without escapes and whole numbers), and by
// encoding/json otherwise, with the same result either way (FuzzFastOpMatchesDecoder,
// TestFastAnswerMatchesEncoder). BenchmarkHandler: encoding/json's reflection,
// decoder and encoder were most of the handler's CPU and allocations.

// maxFastBody is the largest body read whole into a pooled buffer; larger ones (and
// bodies of unknown length) are streamed through encoding/json.
const maxFastBody = 2048

var bodyPool = sync.Pool{New: func() any { b := make([]byte, maxFastBody); return &b }}

// readOpBody parses the body of an op request: by hand when it is small and plain,
// else (or when the hand parser declines) with encoding/json as before.
func readOpBody(r *http.Request, kind counter.Kind, limits counter.Limits) (counter.Op, error) {
	n := r.ContentLength
	if n <= 0 || n > maxFastBody {
		return parseOpBody(r.Body, kind, limits)
	}
	bp := bodyPool.Get().(*[]byte)
	defer bodyPool.Put(bp)
	body := (*bp)[:n]
	if _, err := io.ReadFull(r.Body, body); err != nil {
		if rerr := readError(err); rerr != nil {
			return counter.Op{}, rerr
		}
		return counter.Op{}, jsonError(io.ErrUnexpectedEOF)
	}
	var f opFields
	if scanFlat(body, &f) && f.Op == nil {
		return f.toOp(kind, limits)
	}
	return parseOpBody(bytes.NewReader(body), kind, limits)
}

// fieldOf returns where in f a member named name goes; nil: not one the fast path
// takes.
func fieldOf(f *opFields, name []byte) *json.RawMessage {
	switch string(name) { // no allocation: the compiler compares in place
	case "window":
		return &f.Window
	case "buckets":
		return &f.Buckets
	case "n":
		return &f.N
	case "limit":
		return &f.Limit
	}
	return nil
}

// scanFlat reads b as a flat JSON object of the op fields into f, and reports whether
// it could: false for anything it does not take (escapes, non-ASCII bytes, fractions,
// null, nesting, a repeated or unknown member, bad syntax), which encoding/json then
// reads and judges. The raw values point into b.
func scanFlat(b []byte, f *opFields) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		name, next, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		var val []byte
		if val, i, ok = plainValue(b, i); !ok || !setField(f, name, val) {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// setField stores val (a raw JSON string or number) as member name, once.
func setField(f *opFields, name, val []byte) bool {
	if string(name) == "key" || string(name) == "op" {
		if val[0] != '"' {
			return false // a wrong type: encoding/json words the error
		}
		p := &f.Key
		if string(name) == "op" {
			p = &f.Op
		}
		if *p != nil {
			return false
		}
		s := string(val[1 : len(val)-1])
		*p = &s
		return true
	}
	dst := fieldOf(f, name)
	if dst == nil || *dst != nil {
		return false
	}
	*dst = val
	return true
}

// plainValue reads a string (plainString) or an integer literal at b[i:].
func plainValue(b []byte, i int) (val []byte, next int, ok bool) {
	if i < len(b) && b[i] == '"' {
		if _, next, ok = plainString(b, i); !ok {
			return nil, 0, false
		}
		return b[i:next:next], next, true
	}
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == start || (b[start] == '0' && j-start > 1) {
		return nil, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return nil, 0, false
	}
	return b[i:j:j], j, true
}

// plainString reads a JSON string at b[i:] made of printable ASCII without escapes,
// and returns its contents and the index after it.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// appendAnswer appends the JSON answer to a decided op (render's, and a newline, as
// json.Encoder writes it) and reports whether it could: the key must be a string that
// encoding/json writes as it is, and the answer not the fail policy's (rare, and its
// reason is any text).
func appendAnswer(b []byte, op *counter.Op, res *counter.Result) ([]byte, bool) {
	if !plainKey(op.Key) || res.Undecided != nil {
		return b, false
	}
	b = append(append(append(b, `{"key":"`...), op.Key...), '"')
	switch op.Kind {
	case counter.Allow:
		b = strconv.AppendBool(append(b, `,"allowed":`...), res.Allowed)
		b = strconv.AppendInt(append(b, `,"count":`...), res.Count, 10)
		b = strconv.AppendInt(append(b, `,"remaining":`...), res.Remaining, 10)
		b = strconv.AppendInt(append(b, `,"retry_after_ms":`...), res.RetryAfterMs, 10)
		if res.Sliced {
			b = append(b, `,"sliced":true`...)
		}
	case counter.Reset:
		b = strconv.AppendBool(append(b, `,"existed":`...), res.Existed)
	default:
		b = strconv.AppendInt(append(b, `,"count":`...), res.Count, 10)
	}
	return append(b, "}\n"...), true
}

// plainKey reports whether encoding/json writes s unchanged between quotes: printable
// ASCII without '"', '\\' and the HTML characters it escapes.
func plainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
