package h2grpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The cases of h2spec (make h2spec) that the server once failed and passes now, each
// with what RFC 9113 asks; make h2spec runs the whole suite against a node.

// block encodes header fields, name and value in turn.
func block(kv ...string) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(kv); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return hb.Bytes()
}

// get is a plain HTTP request's headers, as h2spec sends them.
var get = []string{":method", "GET", ":scheme", "http", ":path", "/", ":authority", "x"}

// headersFrame is a HEADERS frame of one block on id, ending the request with end.
func headersFrame(id uint32, end bool, hb []byte) []byte {
	flags := http2.FlagHeadersEndHeaders
	if end {
		flags |= http2.FlagHeadersEndStream
	}
	return appendFrame(nil, http2.FrameHeaders, flags, id, hb)
}

func TestWhatH2specChecks(t *testing.T) {
	f := start(t, nil)
	type want struct {
		goAway http2.ErrCode // a GOAWAY with this code, then a clean close; or
		reset  http2.ErrCode // an RST_STREAM of stream 1 with this code, the connection open
	}
	oversized := appendFrameHeader(nil, http2.FrameData, 0, 1, 16385)
	for name, c := range map[string]struct {
		send []byte
		want want
	}{
		// 4.2: a frame over SETTINGS_MAX_FRAME_SIZE is FRAME_SIZE_ERROR (the connection's,
		// for a frame that could change its state); before, it was closed at once, reset.
		"4.2 DATA over the frame size": {append(append(headersFrame(1, false, block(get...)), oversized...), make([]byte, 16385)...),
			want{goAway: http2.ErrCodeFrameSize}},
		"4.2 HEADERS over the frame size": {append(appendFrameHeader(nil, http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, 1, 16385), make([]byte, 16385)...),
			want{goAway: http2.ErrCodeFrameSize}},
		// 5.1: RST_STREAM and WINDOW_UPDATE on an idle stream are PROTOCOL_ERROR.
		"5.1 RST_STREAM on an idle stream":    {appendFrame(nil, http2.FrameRSTStream, 0, 1, []byte{0, 0, 0, 8}), want{goAway: http2.ErrCodeProtocol}},
		"5.1 WINDOW_UPDATE on an idle stream": {appendFrame(nil, http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 1}), want{goAway: http2.ErrCodeProtocol}},
		// 5.1, 6.1: DATA on a closed stream (the request ended; here it was answered
		// at once) is STREAM_CLOSED; before, it was dropped silently.
		"5.1 DATA on a closed stream": {append(headersFrame(1, true, block(get...)), appendFrame(nil, http2.FrameData, 0, 1, []byte("x"))...),
			want{reset: http2.ErrCodeStreamClosed}},
		// 5.3.1: a stream that depends on itself is PROTOCOL_ERROR.
		"5.3.1 HEADERS depending on itself": {appendFrame(nil, http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream|http2.FlagHeadersPriority, 1,
			append([]byte{0, 0, 0, 1, 16}, block(get...)...)), want{reset: http2.ErrCodeProtocol}},
		"5.3.1 PRIORITY depending on itself": {appendFrame(nil, http2.FramePriority, 0, 1, []byte{0, 0, 0, 1, 16}), want{reset: http2.ErrCodeProtocol}},
		// 8.1.2.2, 8.1.2.3: malformed requests are PROTOCOL_ERROR, before any answer.
		"8.1.2.2 a connection-specific field": {headersFrame(1, true, block(append(get, "connection", "keep-alive")...)), want{reset: http2.ErrCodeProtocol}},
		"8.1.2.2 TE other than trailers":      {headersFrame(1, true, block(append(get, "te", "gzip")...)), want{reset: http2.ErrCodeProtocol}},
		"8.1.2.3 an empty :path":              {headersFrame(1, true, block(":method", "GET", ":scheme", "http", ":path", "", ":authority", "x")), want{reset: http2.ErrCodeProtocol}},
		"8.1.2.3 no :method":                  {headersFrame(1, true, block(":scheme", "http", ":path", "/", ":authority", "x")), want{reset: http2.ErrCodeProtocol}},
		"8.1.2.3 no :scheme":                  {headersFrame(1, true, block(":method", "GET", ":path", "/", ":authority", "x")), want{reset: http2.ErrCodeProtocol}},
		"8.1.2.3 no :path":                    {headersFrame(1, true, block(":method", "GET", ":scheme", "http", ":authority", "x")), want{reset: http2.ErrCodeProtocol}},
	} {
		t.Run(name, func(t *testing.T) {
			fr, nc := rawConn(t, f.addr)
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			go nc.Write(c.send) // the server may stop reading midway
			if c.want.goAway != 0 {
				if code := goAwayCode(t, fr); code != c.want.goAway {
					t.Fatalf("GOAWAY %v; want %v", code, c.want.goAway)
				}
				closedCleanly(t, nc)
				return
			}
			wantReset(t, fr, 1, c.want.reset)
		})
	}
}

// 3.5: a client whose preface is wrong is closed, and cleanly: what it sent after is
// read and dropped first. Before, the connection was closed with the client's bytes
// unread, which resets it.
func TestWrongPrefaceIsClosedCleanly(t *testing.T) {
	f := start(t, nil)
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	nc.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"), make([]byte, 4096)...))
	closedCleanly(t, nc)
}

// closedCleanly reads nc until it ends, which must be by the server's close (EOF), not
// a reset.
func closedCleanly(t *testing.T, nc net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, nc)
	if errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection was reset: %v", err)
	}
	if err != nil {
		t.Fatalf("the connection did not close: %v", err)
	}
}
