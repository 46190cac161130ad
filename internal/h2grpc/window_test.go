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
	received, ended := 0, 0
	for ended < calls {
		fr0, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d bytes and %d answers: %v", received, ended, err)
		}
		switch fr0 := fr0.(type) {
		case *http2.DataFrame:
			received += len(fr0.Data())
			if received%65535 == 0 || received >= 65535 && received-len(fr0.Data()) < 65535 {
				if err := fr.WriteWindowUpdate(0, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.HeadersFrame:
			if fr0.StreamEnded() {
				ended++
			}
		case *http2.SettingsFrame:
			if !fr0.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}
	if want := calls * (answer + 5); received != want {
		t.Fatalf("got %d bytes of answers; want %d", received, want)
	}
}

// rawCalls opens a connection to addr and sends calls Health/Check calls on it, with
// the default windows; it returns the connection's framer.
func rawCalls(t *testing.T, addr string, calls int) *http2.Framer {
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
	if err := fr.WriteSettings(); err != nil {
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
