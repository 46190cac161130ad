package loadgen

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	req := Command(Str("EVALSHA"), Str("abc"), Str("1"), Key, Now, Member)
	got := string(req(nil, []byte("k:7"), 1700000000123, 5))
	want := "*6\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$3\r\nk:7\r\n$13\r\n1700000000123\r\n$15\r\n1700000000123-5\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// What it writes is one command to a RESP reader.
	if err := readRESP(newReader(strings.NewReader(got), 16)); err != nil {
		t.Fatal(err)
	}
}

// The request is one a Go HTTP server reads: method, path, length and body.
func TestHTTPPost(t *testing.T) {
	req := HTTPPost("/v1/allow", `{"key":"`, `","window":"60s","limit":5}`)
	raw := req(nil, []byte("k:1"), 0, 0)
	raw = req(raw, []byte("k:22"), 0, 0) // two pipelined on one buffer
	br := bufio.NewReader(strings.NewReader(string(raw)))
	for _, key := range []string{"k:1", "k:22"} {
		r, err := http.ReadRequest(br)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.URL.Path != "/v1/allow" || string(body) != `{"key":"`+key+`","window":"60s","limit":5}` {
			t.Fatalf("%s %s %q", r.Method, r.URL.Path, body)
		}
	}
}

func TestRequestsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 512)
	key := []byte("bench:12345")
	for name, req := range map[string]Request{
		"command": Command(Str("SW.INCR"), Key, Str("60s"), Now, Member),
		"http":    HTTPPost("/v1/incr", `{"key":"`, `","window":"60s"}`),
	} {
		if n := testing.AllocsPerRun(100, func() { buf = req(buf[:0], key, 1, 2) }); n != 0 {
			t.Fatalf("%s: %v allocations per request", name, n)
		}
	}
}
