package h2grpc

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2"
)

// startOther starts Others handler on a call the server has no unary handler
// for (grpc.Server.ServeHTTP: streaming calls, health, reflection).
func (c *conn) startOther(st *stream, f *headerList) {
	st.body = &body{consumed: func(n int, more bool) {
		if more {
			c.giveStream(st, n)
		} else {
			c.giveConn(n) // the client sends no more on it: the connection's alone
		}
	}}
	st.body.cond.L = &st.body.mu
	hdr := make(http.Header, len(f.fields))
	for _, hf := range f.RegularFields() {
		k := http.CanonicalHeaderKey(hf.Name)
		hdr[k] = append(hdr[k], hf.Value)
	}
	ctx := context.WithValue(c.ctx, http.LocalAddrContextKey, c.nc.LocalAddr())
	c.mu.Lock()
	ctx, st.cancel = context.WithCancel(ctx)
	st.running = true
	c.mu.Unlock()
	r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: st.method}, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: hdr, Body: st.body, ContentLength: -1, Host: f.PseudoValue("authority"),
		RemoteAddr: c.nc.RemoteAddr().String(), RequestURI: st.method}).WithContext(ctx)
	rw := &responseWriter{c: c, st: st, header: http.Header{}}
	c.s.handlers.Add(1)
	go func() {
		defer c.s.handlers.Done()
		defer c.forget(st)
		defer func() {
			if p := recover(); p != nil {
				c.s.cfg.Logger.Error("grpc: handler of other calls panicked", "method", st.method, "panic", p)
				c.resetStream(st.id, http2.ErrCodeInternal)
			}
		}()
		c.s.cfg.Others.ServeHTTP(rw, r)
		rw.finish()
		if !st.body.eof() {
			// The answer ended before the request did: the client may stop sending.
			c.w.control(http2.FrameRSTStream, 0, st.id, binary.BigEndian.AppendUint32(nil, uint32(http2.ErrCodeNo)))
		}
		st.body.Close()
	}()
}

// body is an other call's request body, as its DATA frames arrive. The client's
// windows bound it (conn.onData); each read gives them back, and so does dropping what
// the handler did not read.
type body struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	err    error // io.EOF once the client ended its side; errStreamGone when reset
	closed bool  // the handler closed it
	// consumed gives back the windows of n bytes read or dropped; more: the client may
	// still send on the stream (else the connection's window alone).
	consumed func(n int, more bool)
}

// push adds p; false when nobody will read it (the handler closed the body, or the
// stream was reset): the caller drops it.
func (b *body) push(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.err != nil {
		return false
	}
	b.buf = append(b.buf, p...)
	b.cond.Broadcast()
	return true
}

func (b *body) end(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *body) eof() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

var errBodyClosed = errors.New("h2grpc: body closed by handler")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.buf) == 0 && b.err == nil && !b.closed {
		b.cond.Wait()
	}
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, errBodyClosed
	case len(b.buf) == 0:
		err := b.err
		b.mu.Unlock()
		if err != io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	if len(b.buf) == 0 {
		b.buf = nil
	}
	more := b.err == nil
	b.mu.Unlock()
	b.consumed(n, more)
	return n, nil
}

func (b *body) Close() error {
	b.mu.Lock()
	dropped := len(b.buf)
	b.closed = true
	b.buf = nil
	b.cond.Broadcast()
	b.mu.Unlock()
	if dropped > 0 {
		b.consumed(dropped, false)
	}
	return nil
}

// responseWriter turns an Others handler's answer into HEADERS and DATA frames, and
// its trailers (declared, or named with http.TrailerPrefix) into the closing HEADERS.
type responseWriter struct {
	c      *conn
	st     *stream
	header http.Header
	sent   bool // headers sent
	err    error
}

func (rw *responseWriter) Header() http.Header { return rw.header }

func (rw *responseWriter) WriteHeader(code int) {
	if rw.sent {
		return
	}
	rw.sent = true
	block := appendStatusCode(nil, code)
	for k, vv := range rw.header {
		if k == "Trailer" || k == "Date" || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vv {
			block = appendLiteral(block, strings.ToLower(k), v)
		}
	}
	rw.err = rw.c.w.headers(rw.st, block, false)
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	rw.WriteHeader(http.StatusOK)
	if rw.err == nil {
		rw.err = rw.c.w.data(rw.st, p)
	}
	if rw.err != nil {
		return 0, rw.err
	}
	return len(p), nil
}

func (rw *responseWriter) Flush() { rw.WriteHeader(http.StatusOK) }

// finish sends the trailers, ending the answer.
func (rw *responseWriter) finish() {
	rw.WriteHeader(http.StatusOK)
	var block []byte
	declared := map[string]bool{}
	for _, v := range rw.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			declared[http.CanonicalHeaderKey(strings.TrimSpace(k))] = true
		}
	}
	for k, vv := range rw.header {
		name, ok := strings.CutPrefix(k, http.TrailerPrefix)
		if !ok && !declared[k] {
			continue
		}
		for _, v := range vv {
			block = appendLiteral(block, strings.ToLower(name), v)
		}
	}
	if rw.err == nil {
		rw.c.w.headers(rw.st, block, true)
	}
}

// appendStatusCode appends :status code (200 from the static table, others as a
// literal with the static table's name).
func appendStatusCode(b []byte, code int) []byte {
	if code == http.StatusOK {
		return append(b, status200)
	}
	b = appendHpackInt(b, 0, 4, 8) // literal without indexing, name :status
	v := strconv.Itoa(code)
	b = appendHpackInt(b, 0, 7, uint64(len(v)))
	return append(b, v...)
}
