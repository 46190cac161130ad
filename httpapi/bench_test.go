package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkHTTPIncr is one POST /v1/incr through a real socket, keep-alive on: the
// whole path of a request (net/http, parse, Doer, JSON answer, metrics).
func BenchmarkHTTPIncr(b *testing.B) {
	a := newAPI(b, nil)
	client := &http.Client{}
	const body = `{"key":"bench","window":"1m","n":1}`
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(a.url+"/v1/incr", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("got status %d; want 200", resp.StatusCode)
		}
	}
}
