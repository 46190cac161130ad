package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Answers made on the connection's reader (an AsyncHandler that replies at once) past
// the client's connection window wait for its WINDOW_UPDATE without holding the reader,
// which must read that update: a client that lets the window run out between its
// updates gets every answer.
func TestAnswersPastTheConnectionWindowDoNotHoldTheReader(t *testing.T) {
	const answer, calls = 20_000, 6 // 120 kB of answers against a 64 kB window
	f := start(t, func(cfg *Config) {
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			reply(append(c.Out, make([]byte, answer)...), nil)
		}}
	})
	fr := rawCalls(t, f.addr, calls)
	// Read the answers, giving the window back only once it has run out, as a client
	// that updates it in large steps does.
	received := 0
	readAnswers(t, fr, calls, func(d *http2.DataFrame) {
		received += len(d.Data())
		if received >= 65535 && received-len(d.Data()) < 65535 {
			if err := fr.WriteWindowUpdate(0, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
	})
	if want := calls * (answer + 5); received != want {
		t.Fatalf("got %d bytes of answers; want %d", received, want)
	}
}

// rawCalls opens a connection to addr with settings and sends calls Health/Check calls
// on it; it returns the connection's framer.
func rawCalls(t *testing.T, addr string, calls int, settings ...http2.Setting) *http2.Framer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(nc, nc)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", checkMethod}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	for i := range calls {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
	}
	return fr
}

// Answers an AsyncHandler made that the client's windows hold back are held up to
// maxQueued; a client that takes none past that loses the connection, the server no
// more memory.
func TestAnswersHeldBackAreBounded(t *testing.T) {
	const answer, calls = 300 << 10, 6 // 1.8 MB of answers, 64 kB of window
	f := start(t, func(cfg *Config) {
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			reply(append(c.Out, make([]byte, answer)...), nil)
		}}
	})
	fr := rawCalls(t, f.addr, calls)
	received := 0
	for {
		fr0, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection stayed open with %d bytes of answers held back", calls*answer-received)
			}
			break // closed
		}
		if d, ok := fr0.(*http2.DataFrame); ok {
			received += len(d.Data())
		}
	}
	if received > 65535 {
		t.Fatalf("got %d bytes; the window allowed 65535", received)
	}
}

// An answer held back by its own stream's window goes out as that stream's
// WINDOW_UPDATEs come: its call stays open for them until it has.
func TestAnswersWaitForTheirStreamsWindow(t *testing.T) {
	const answer, calls, window = 20_000, 3, 4096
	f := start(t, func(cfg *Config) {
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			reply(append(c.Out, make([]byte, answer)...), nil)
		}}
	})
	fr := rawCalls(t, f.addr, calls, http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
	fr.WriteWindowUpdate(0, 1<<20) // the connection's window is not what holds them back
	received := map[uint32]int{}
	readAnswers(t, fr, calls, func(d *http2.DataFrame) {
		received[d.StreamID] += len(d.Data())
		if err := fr.WriteWindowUpdate(d.StreamID, uint32(len(d.Data()))); err != nil {
			t.Fatal(err)
		}
	})
	for id, n := range received {
		if n != answer+5 {
			t.Fatalf("stream %d: %d bytes; want %d", id, n, answer+5)
		}
	}
}

// readAnswers reads frames until calls answers have ended, handing each DATA frame to
// onData and acknowledging the server's SETTINGS.
func readAnswers(t *testing.T, fr *http2.Framer, calls int, onData func(*http2.DataFrame)) {
	t.Helper()
	for ended := 0; ended < calls; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v", ended, err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			onData(f)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				ended++
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}
}

// A WINDOW_UPDATE that would take the connection's window past 2^31-1 is a connection
// error FLOW_CONTROL_ERROR (RFC 9113, 6.9.1): the server says so in its GOAWAY and
// closes. Before, the window grew past what HTTP/2 allows and the connection went on.
func TestConnectionWindowOverflowIsAFlowControlError(t *testing.T) {
	f := start(t, nil)
	fr, nc := rawConn(t, f.addr)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := fr.WriteWindowUpdate(0, 1<<31-1); err != nil { // 65535 + 2^31-1
		t.Fatal(err)
	}
	if code := goAwayCode(t, fr); code != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %v; want FLOW_CONTROL_ERROR", code)
	}
}

// A WINDOW_UPDATE that would take one stream's window past 2^31-1 resets that stream
// with FLOW_CONTROL_ERROR; the connection goes on.
func TestStreamWindowOverflowResetsTheStream(t *testing.T) {
	f := start(t, func(cfg *Config) {
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			go func() { // the call stays open (not on the reader, which must read on)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
				reply(nil, errors.New("held"))
			}()
		}}
	})
	fr := rawCalls(t, f.addr, 1)
	if err := fr.WriteWindowUpdate(1, 1<<31-1); err != nil { // 65535 + 2^31-1 on stream 1
		t.Fatal(err)
	}
	wantReset(t, fr, 1, http2.ErrCodeFlowControl)
}

// goAwayCode reads frames until a GOAWAY and returns its code.
func goAwayCode(t *testing.T, fr *http2.Framer) http2.ErrCode {
	t.Helper()
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY before %v", err)
		}
		if g, ok := fm.(*http2.GoAwayFrame); ok {
			return g.ErrCode
		}
	}
}

// waitPingAck reads frames until a PING acknowledgement: the connection still serves.
func waitPingAck(t *testing.T, fr *http2.Framer) {
	t.Helper()
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no PING ack before %v", err)
		}
		if p, ok := fm.(*http2.PingFrame); ok && p.IsAck() {
			return
		}
	}
}
