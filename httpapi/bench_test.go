package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkHTTPIncr is one POST /v1/incr through a real socket, keep-alive on: the
// whole path of a request (net/http, parse, Decider, JSON answer, metrics).
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

// discardWriter is a ResponseWriter that keeps the status and drops the body.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

// BenchmarkHandler is the handler alone (routing, auth, metrics, parse, Decider, answer),
// without sockets or net/http's connection work: the part of a request's CPU that
// is this package's.
func BenchmarkHandler(b *testing.B) {
	for _, c := range []struct{ path, body string }{
		{"/v1/incr", `{"key":"bench","window":"1m","n":1}`},
		{"/v1/allow", `{"key":"bench","window":"1m","limit":1000000000}`},
	} {
		b.Run(c.path[4:], func(b *testing.B) {
			a := newAPI(b, nil)
			h := a.handler
			body := strings.NewReader(c.body)
			tmpl, err := http.NewRequest(http.MethodPost, c.path, nil)
			if err != nil {
				b.Fatal(err)
			}
			tmpl.RemoteAddr = "127.0.0.1:9"
			req := new(http.Request)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(c.body)
				*req = *tmpl // the handler wraps the body it was given
				req.Body, req.ContentLength = io.NopCloser(body), int64(len(c.body))
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, req)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("got status %d; want 200", w.status)
				}
			}
		})
	}
}
