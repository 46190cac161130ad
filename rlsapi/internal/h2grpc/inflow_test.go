package h2grpc

import (
	"cmp"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/leapcount/leapcount/internal/testkit/hostile"
)

// holdMethod goes to Others (no handler of ours has it).
const holdMethod = "/t.Hold/Hold"

// callHeaders is the header block of a call of method.
func callHeaders(method string) []byte { return hostile.CallHeaders(method) }

// holdingOthers never reads a request body: what a client sends stays buffered.
func holdingOthers(cfg *Config) {
	cfg.Others = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
}

// A client that sends more DATA than the connection's window (1 MiB), spread over
// streams whose own windows it keeps, gets GOAWAY FLOW_CONTROL_ERROR (RFC 9113, 6.9.1).
// Before, the server gave the connection's window back as it read, whatever its
// handlers had consumed, so that every open stream could hold its window full: 128
// times 64 KiB buffered per connection.
func TestConnectionWindowOverrunIsAFlowControlError(t *testing.T) {
	f := start(t, holdingOthers)
	fr, nc := rawConn(t, f.addr)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	go func() { // 20 streams of 60,000 bytes each: 1.2 MB, each stream within its 64 KiB
		hb := callHeaders(holdMethod)
		chunk := make([]byte, 15_000)
		for i := range 20 {
			id := uint32(2*i + 1)
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb, EndHeaders: true}) != nil {
				return
			}
			for range 4 {
				if fr.WriteData(id, false, chunk) != nil {
					return // closed: the test reads why
				}
			}
		}
	}()
	if code := goAwayCode(t, fr); code != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %v; want FLOW_CONTROL_ERROR", code)
	}
}

// A call of ours whose client sends more than the stream's window (its prefix claiming
// a small message) is reset FLOW_CONTROL_ERROR; the connection goes on. Before, it was
// answered RESOURCE_EXHAUSTED as an oversized message.
func TestStreamWindowOverrunResetsTheStream(t *testing.T) {
	f := start(t, nil)
	fr, nc := rawConn(t, f.addr)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: checkHeaders(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	fr.WriteData(1, false, []byte{0, 0, 0, 0, 10})
	for sent := 5; sent <= 70_000; sent += 10_000 { // past the window, 65,541
		fr.WriteData(1, false, make([]byte, 10_000))
	}
	wantReset(t, fr, 1, http2.ErrCodeFlowControl)
}

// Padding counts against the windows (RFC 9113, 6.9.1), and nobody reads it: the
// server gives it back at once. A client that pads every frame sends an other call
// 400 kB, six times its stream's window, in frames of 1 KiB; before, the padding was
// never given back and the stream's window ran out for good midway (after 256 frames).
func TestPaddingIsGivenBack(t *testing.T) {
	f := start(t, func(cfg *Config) {
		cfg.Others = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	})
	fr, nc := rawConn(t, f.addr)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	wc := newWindowedClient(fr)
	wc.pad, wc.frame = 255, 1024 // a quarter of each frame padding
	if err := wc.open(1, holdMethod); err != nil {
		t.Fatal(err)
	}
	if err := wc.send(1, 400_000); err != nil {
		t.Fatal(err)
	}
}

// wantReset reads frames until id's RST_STREAM, which must carry code, then checks that
// the connection still answers a PING.
func wantReset(t *testing.T, fr *http2.Framer, id uint32, code http2.ErrCode) {
	t.Helper()
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM before %v", err)
		}
		switch fm := fm.(type) {
		case *http2.RSTStreamFrame:
			if fm.StreamID != id || fm.ErrCode != code {
				t.Fatalf("RST_STREAM %d %v; want stream %d %v", fm.StreamID, fm.ErrCode, id, code)
			}
			if err := fr.WritePing(false, [8]byte{1}); err != nil {
				t.Fatal(err)
			}
			waitPingAck(t, fr)
			return
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v; want stream %d reset alone", fm.ErrCode, id)
		}
	}
}

// A client that keeps both windows gets them back as Others consumes its
// requests, read or dropped (a handler that answers without reading all of its
// request): 40 calls of 60,000 bytes each, twice the connection's window, all go
// through, half of them read and half dropped.
func TestWindowsComeBackAsRequestsAreConsumed(t *testing.T) {
	f := start(t, func(cfg *Config) {
		cfg.Others = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == holdMethod {
				io.Copy(io.Discard, r.Body)
			}
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		})
	})
	fr, nc := rawConn(t, f.addr)
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	wc := newWindowedClient(fr)
	for i := range 40 {
		id, method := uint32(2*i+1), holdMethod
		if i%2 == 1 {
			method = "/t.Drop/Drop"
		}
		if err := wc.open(id, method); err != nil {
			t.Fatal(err)
		}
		if err := wc.send(id, 60_000); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// windowedClient sends DATA within the windows the server gives, as its reader
// learns of them.
type windowedClient struct {
	fr     *http2.Framer
	wmu    sync.Mutex // writes
	mu     sync.Mutex // what follows
	cond   sync.Cond
	conn   int64
	stream map[uint32]int64 // window added by WINDOW_UPDATE, over the initial 65,535
	reset  map[uint32]bool
	err    error
	pad    int   // padding in every DATA frame
	frame  int64 // the largest frame it sends (default 16384)
}

func newWindowedClient(fr *http2.Framer) *windowedClient {
	wc := &windowedClient{fr: fr, conn: 65535, stream: map[uint32]int64{}, reset: map[uint32]bool{}}
	wc.cond.L = &wc.mu
	go wc.read()
	return wc
}

func (wc *windowedClient) read() {
	for {
		fm, err := wc.fr.ReadFrame()
		wc.mu.Lock()
		switch fm := fm.(type) {
		case *http2.WindowUpdateFrame:
			if fm.StreamID == 0 {
				wc.conn += int64(fm.Increment)
			} else {
				wc.stream[fm.StreamID] += int64(fm.Increment)
			}
		case *http2.RSTStreamFrame:
			wc.reset[fm.StreamID] = true
		case *http2.GoAwayFrame:
			err = http2.ConnectionError(fm.ErrCode)
		case *http2.SettingsFrame:
			if !fm.IsAck() {
				wc.wmu.Lock()
				wc.fr.WriteSettingsAck()
				wc.wmu.Unlock()
			}
		}
		if err != nil {
			wc.err = err
		}
		wc.cond.Broadcast()
		wc.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// open sends the headers of a call of method on stream id.
func (wc *windowedClient) open(id uint32, method string) error {
	wc.wmu.Lock()
	defer wc.wmu.Unlock()
	return wc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: callHeaders(method), EndHeaders: true})
}

// send sends n bytes on id, ending its request, each frame when both windows have room
// (the server's SETTINGS_INITIAL_WINDOW_SIZE is not waited for: 65,535 is less); a
// stream the server reset is done.
func (wc *windowedClient) send(id uint32, n int) error {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	var sent, used int64 // data sent; and with padding, what the windows took
	for sent < int64(n) {
		pad := int64(wc.pad)
		if pad > 0 {
			pad++ // the Pad Length field
		}
		room := min(wc.conn, 65535+wc.stream[id]-used, cmp.Or(wc.frame, 16384)) - pad
		room = min(room, int64(n)-sent)
		switch {
		case wc.err != nil:
			return wc.err
		case wc.reset[id]:
			return nil
		case room <= 0:
			wc.cond.Wait()
			continue
		}
		wc.conn -= room + pad
		sent += room
		used += room + pad
		wc.mu.Unlock() // the reader goes on meanwhile
		wc.wmu.Lock()
		var err error
		if wc.pad > 0 {
			err = wc.fr.WriteDataPadded(id, sent == int64(n), make([]byte, room), make([]byte, wc.pad))
		} else {
			err = wc.fr.WriteData(id, sent == int64(n), make([]byte, room))
		}
		wc.wmu.Unlock()
		wc.mu.Lock()
		if err != nil {
			return err
		}
	}
	return nil
}
