package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// A request larger than the stream's window (the default cap of 64 KiB) never arrives
// whole: it is refused by its prefix, not left waiting for the client's deadline.
func TestRequestOverTheWindowIsRefusedByItsPrefix(t *testing.T) {
	f := start(t, nil)
	cl := f.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cl.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 100_000)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v; want ResourceExhausted", err)
	}
	if _, err := cl.Check(ctx, &healthpb.HealthCheckRequest{Service: "small"}); err != nil {
		t.Fatalf("a call after it: %v", err)
	}
}

// A request whose client stops sending midway is answered DEADLINE_EXCEEDED once
// RequestTimeout has passed, while the connection's other calls go on.
func TestStalledRequestIsAnsweredAndTheConnectionGoesOn(t *testing.T) {
	f := start(t, func(c *Config) { c.RequestTimeout = 400 * time.Millisecond })
	fr, nc := rawConn(t, f.addr)
	hb := checkHeaders()
	// Stream 1 says 100 bytes and sends 10; stream 3, sent after, is whole.
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb, EndHeaders: true})
	fr.WriteData(1, false, append([]byte{0, 0, 0, 0, 100}, make([]byte, 5)...))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb, EndHeaders: true})
	fr.WriteData(3, true, []byte{0, 0, 0, 0, 0})
	// Frames keep coming (pings), as on a connection with other calls.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				fr.WritePing(false, [8]byte{})
			}
		}
	}()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	codesOf := map[uint32]string{}
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {})
	for len(codesOf) < 2 {
		fr0, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("answers so far %v: %v", codesOf, err)
		}
		h, ok := fr0.(*http2.HeadersFrame)
		if !ok || !h.StreamEnded() {
			continue
		}
		codesOf[h.StreamID] = grpcStatusOf(t, dec, h)
	}
	if codesOf[1] != "4" || codesOf[3] != "0" {
		t.Fatalf("grpc-status by stream: %v; want 1: 4 (DEADLINE_EXCEEDED), 3: 0", codesOf)
	}
}

// A client that sends nothing more, its request half sent, loses the connection.
func TestClientSilentMidRequestIsClosed(t *testing.T) {
	f := start(t, func(c *Config) { c.RequestTimeout = 400 * time.Millisecond })
	fr, nc := rawConn(t, f.addr)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: checkHeaders(), EndHeaders: true})
	nc.Write(appendFrameHeader(nil, http2.FrameData, 0, 1, 100)) // a DATA frame of 100 bytes
	nc.Write(make([]byte, 10))                                   // of which 10 come
	closedWithin(t, nc, 5*time.Second, "the connection of a client silent mid-request")
}

// A client that sends something other than HTTP/2 is closed at its first wrong byte,
// not after the handshake timeout.
func TestWrongPrefaceIsClosedAtOnce(t *testing.T) {
	f := start(t, nil) // a handshake timeout of 10 s
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("garbage\r\n\r\n"))
	closedWithin(t, c, 3*time.Second, "the connection of a client that sent no preface")
}

// closedWithin reads c, discarding what comes, until the server closes it; it fails
// the test if that takes longer than d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%s stayed open for %v", what, d)
			}
			return // closed by the server
		}
	}
}

// rawConn opens a connection to addr, sends the preface and empty SETTINGS.
func rawConn(t *testing.T, addr string) (*http2.Framer, net.Conn) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr, nc
}

// checkHeaders is the header block of a Health/Check call.
func checkHeaders() []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", checkMethod}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return hb.Bytes()
}

// A call Authorize refuses is answered as its headers come, before any of its request:
// a client without credentials holds no stream while it sends (or stalls).
func TestUnauthorizedCallIsRefusedAtItsHeaders(t *testing.T) {
	f := start(t, func(c *Config) {
		c.Authorize = func(method, auth string, _ net.Addr) error {
			if auth != "Bearer yes" {
				return status.Error(codes.Unauthenticated, "missing bearer token")
			}
			return nil
		}
	})
	fr, nc := rawConn(t, f.addr)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: checkHeaders(), EndHeaders: true}) // no request follows
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	dec := hpack.NewDecoder(4096, nil)
	for {
		fr0, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer to a call without credentials within 3s: %v", err)
		}
		h, ok := fr0.(*http2.HeadersFrame)
		if !ok || !h.StreamEnded() {
			continue
		}
		if code := grpcStatusOf(t, dec, h); code != "16" {
			t.Fatalf("grpc-status %q; want 16 (UNAUTHENTICATED)", code)
		}
		break
	}
	if _, err := f.dial(t).Check(metadataCtx("authorization", "Bearer yes"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call with credentials: %v", err)
	}
}

// grpcStatusOf is the grpc-status of an answer's trailers ("" when it has none).
func grpcStatusOf(t *testing.T, dec *hpack.Decoder, h *http2.HeadersFrame) string {
	t.Helper()
	fields, err := dec.DecodeFull(h.HeaderBlockFragment())
	if err != nil {
		t.Fatal(err)
	}
	for _, hf := range fields {
		if hf.Name == "grpc-status" {
			return hf.Value
		}
	}
	return ""
}
