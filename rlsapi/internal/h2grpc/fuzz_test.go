package h2grpc

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzConn feeds a connection arbitrary frames after a valid preface and SETTINGS: the
// server must neither panic nor hang, and must stop within a bound once the client
// closes.
func FuzzConn(f *testing.F) {
	call := func(path string, end bool) []byte {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "x"}, {"content-type", "application/grpc"}, {"grpc-timeout", "1S"}} {
			enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		flags := http2.FlagHeadersEndHeaders
		if end {
			flags |= http2.FlagHeadersEndStream
		}
		return appendFrame(nil, http2.FrameHeaders, flags, 1, hb.Bytes())
	}
	msg := appendFrame(nil, http2.FrameData, http2.FlagDataEndStream, 1, []byte{0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add(append(call("/t/Unary", false), msg...))
	f.Add(append(call("/t/Stream", false), msg...))
	f.Add(call("/t/Unary", true))
	f.Add(append(call("/t/Unary", false), appendFrame(nil, http2.FrameRSTStream, 0, 1, []byte{0, 0, 0, 8})...))
	f.Add(append(call("/t/Stream", false), appendFrame(nil, http2.FrameRSTStream, 0, 1, []byte{0, 0, 0, 8})...))
	f.Add(appendFrame(nil, http2.FramePing, 0, 0, make([]byte, 8)))
	f.Add(appendFrame(nil, http2.FrameSettings, 0, 0, []byte{0, 4, 0xff, 0xff, 0xff, 0xff}))
	f.Add(appendFrame(nil, http2.FrameContinuation, http2.FlagContinuationEndHeaders, 1, []byte{0x88}))
	f.Add(appendFrame(nil, http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 1}))
	f.Add(append(call("/t/Unary", false), appendFrame(nil, http2.FrameData, 0, 1, []byte{0, 0xff, 0xff, 0xff, 0xff})...))
	f.Add(append(call("/t/Unary", false), call("/t/Unary", true)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzServe(t, fuzzConfig(), nil, data)
	})
}

// fuzzConfig is the configuration of a server the fuzzers run: a call of its own that
// answers its request, and an Others handler that echoes its body.
func fuzzConfig() Config {
	return Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Handshake: time.Second, WriteTimeout: time.Second,
		Unary: map[string]UnaryHandler{"/t/Unary": func(ctx context.Context, c *Call) ([]byte, error) {
			return append(c.Out, c.Message...), nil
		}},
		Others: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) }),
	}
}

// fuzzServe serves one connection of a server of cfg over net.Pipe, sends it a valid
// preface and SETTINGS and then each of writes in a write of its own, closes it, and
// fails t unless the server stops within 5 s. With check, the connection's reader calls
// check before each read (checkedConn).
func fuzzServe(t *testing.T, cfg Config, check func(*testing.T, *conn), writes ...[]byte) {
	s := New(cfg)
	client, server := net.Pipe()
	cc := &checkedConn{Conn: server, t: t, check: check}
	c := newConn(s, cc)
	cc.c = c
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.conned.Add(1)
	s.mu.Unlock()
	go c.serve()
	go io.Copy(io.Discard, client)
	client.SetWriteDeadline(time.Now().Add(2 * time.Second))
	client.Write(append([]byte(http2.ClientPreface), appendFrame(nil, http2.FrameSettings, 0, 0, nil)...))
	for _, w := range writes {
		if _, err := client.Write(w); err != nil {
			break // the server closed the connection
		}
	}
	client.Close()
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop within 5 s of the client closing")
	}
}

// checkedConn runs check, when set, whenever the connection's reader reads, on the
// reader: what the reader owns is read there without a race.
type checkedConn struct {
	net.Conn
	t     *testing.T
	c     *conn
	check func(*testing.T, *conn)
}

func (cc *checkedConn) Read(p []byte) (int, error) {
	if cc.check != nil {
		cc.check(cc.t, cc.c)
	}
	return cc.Conn.Read(p)
}
