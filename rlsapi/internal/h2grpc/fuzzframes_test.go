package h2grpc

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"
)

// Caps of the server FuzzConnFrames runs, small so that a fuzzer's input reaches them.
const (
	fuzzStreams = 4
	fuzzMsg     = 1000 // MaxRecvMsgSize; a stream's window is then 65,535
	fuzzHeaders = 1024
)

// FuzzConnFrames feeds one server connection a sequence of frames built from the input
// (calls of its own and Others', DATA up to 64 KiB, padded or not, window
// updates, resets, settings, pings, priorities, continuations, GOAWAY and frames of any
// type and payload), each in a write of its own. Between reads the reader checks that
// what the connection holds stays within its caps: calls open, each call's request,
// Others' bodies, the receive window, the queue of frames to write and the
// answers held back. The server must not panic, and must stop within a bound once the
// client closes. FuzzConn feeds it raw bytes.
func FuzzConnFrames(f *testing.F) {
	// Seeds: exchanges a client makes (fuzzFrames says how the bytes read).
	f.Add([]byte{0, 0, 1, 0, 2, 1, 1, 1})                        // a call of ours: headers, then its request, ended
	f.Add([]byte{1, 0, 1, 0, 2, 1, 1, 1})                        // an other call, the same
	f.Add([]byte{0, 0, 1, 0, 4, 0, 1, 0, 0, 0, 1, 0, 2, 1, 1, 1, // a window update on the call
		7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, // a ping
		6, 0, 0, 1, 0, 4, 0, 0, 0xff, 0xff}) // settings: an initial window of 65,535
	f.Add([]byte{0, 0, 1, 0, 2, 0, 1, 1, 5, 0, 1, 0, 0, 0, 0, 8})                                   // a call reset midway
	f.Add([]byte{0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 2, 1, 1, 1})           // past the cap of calls
	f.Add([]byte{1, 0, 1, 0, 11, 1, 1, 16})                                                         // padded DATA, to Others
	f.Add([]byte{0, 0, 1, 0, 2, 0, 1, 255, 2, 0, 1, 255, 2, 0, 1, 255, 2, 0, 1, 255, 2, 0, 1, 255}) // past the stream's window
	f.Add([]byte{3, 9, 1, 4, 0x88, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})                   // a stray CONTINUATION, a GOAWAY
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := fuzzConfig()
		cfg.MaxStreams, cfg.MaxRecvMsgSize, cfg.MaxHeaderBytes = fuzzStreams, fuzzMsg, fuzzHeaders
		fuzzServe(t, cfg, checkCaps, fuzzFrames(data)...)
	})
}

// fuzzFrames turns data into frames, four bytes an op: what, flags, a stream (1, 3, ...
// 15; 0 for 0), and a size, then the payload the op takes from the rest (DATA's is
// made, not taken: a gRPC prefix and zeros).
func fuzzFrames(data []byte) [][]byte {
	var frames [][]byte
	for len(data) >= 4 {
		op, flags, id, n := data[0]%12, http2.Flags(data[1]), uint32(data[2]%8)*2+1, int(data[3])
		if data[2] == 0 {
			id = 0
		}
		data = data[4:]
		take := func(k int) []byte { // k bytes of the input, then zeros
			p := make([]byte, k)
			copy(p, data)
			data = data[min(k, len(data)):]
			return p
		}
		var fr []byte
		switch op {
		case 0, 1: // a call's headers: of ours, or Others'
			path := "/t/Unary"
			if op == 1 {
				path = "/t/Stream"
			}
			hb := block(":method", "POST", ":scheme", "http", ":path", path, ":authority", "x", "content-type", "application/grpc", "grpc-timeout", "1S")
			fr = appendFrame(nil, http2.FrameHeaders, flags&(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders)|http2.FlagHeadersEndHeaders, id, hb)
		case 2: // DATA of n*64 bytes, a gRPC message's prefix first (the stream's window in 5 frames)
			p := make([]byte, n*64)
			if len(p) >= 5 {
				p[0] = 0
				binary.BigEndian.PutUint32(p[1:5], uint32(len(p)-5))
			}
			fr = appendFrame(nil, http2.FrameData, flags&http2.FlagDataEndStream, id, p)
		case 3: // any frame: a type, its flags, a payload of n bytes
			fr = appendFrame(nil, http2.FrameType(flags%10), flags, id, take(n))
		case 4:
			fr = appendFrame(nil, http2.FrameWindowUpdate, 0, id, take(4))
		case 5:
			fr = appendFrame(nil, http2.FrameRSTStream, 0, id, take(4))
		case 6:
			fr = appendFrame(nil, http2.FrameSettings, flags&http2.FlagSettingsAck, 0, take(6*(n%4)))
		case 7:
			fr = appendFrame(nil, http2.FramePing, flags&http2.FlagPingAck, 0, take(8))
		case 8:
			fr = appendFrame(nil, http2.FrameContinuation, flags&http2.FlagContinuationEndHeaders, id, take(n))
		case 9:
			fr = appendFrame(nil, http2.FramePriority, 0, id, take(5))
		case 10:
			fr = appendFrame(nil, http2.FrameGoAway, 0, 0, take(8))
		case 11: // padded DATA: n bytes of data, as many of padding
			fr = appendFrame(nil, http2.FrameData, flags&http2.FlagDataEndStream|http2.FlagDataPadded, id, append([]byte{byte(n)}, make([]byte, 2*n)...))
		}
		frames = append(frames, fr)
	}
	return frames
}

// checkCaps fails t if c holds more than its caps allow; it runs on c's reader.
func checkCaps(t *testing.T, c *conn) {
	c.mu.Lock()
	if len(c.streams) > fuzzStreams {
		t.Errorf("%d calls open; the cap is %d", len(c.streams), fuzzStreams)
	}
	for _, st := range c.streams {
		// (A request the client ended is its handler's, which lets go of it unlocked.)
		if !st.ended.Load() && len(st.msg) > 5+fuzzMsg {
			t.Errorf("a request of %d bytes held; the cap is %d", len(st.msg), 5+fuzzMsg)
		}
		if st.body != nil {
			st.body.mu.Lock()
			if len(st.body.buf) > int(c.streamWindow) {
				t.Errorf("an Others body of %d bytes held; the stream's window is %d", len(st.body.buf), c.streamWindow)
			}
			st.body.mu.Unlock()
		}
	}
	c.mu.Unlock()
	c.in.mu.Lock()
	if c.in.avail < 0 || c.in.avail+c.in.unsent > connWindow {
		t.Errorf("receive window %d, %d consumed not given back; the window is %d", c.in.avail, c.in.unsent, connWindow)
	}
	c.in.mu.Unlock()
	c.w.mu.Lock()
	if len(c.w.buf) > maxQueuedAnswers+64<<10 || c.w.heldBytes > maxQueued {
		t.Errorf("%d bytes queued and %d held back; the caps are %d and %d", len(c.w.buf), c.w.heldBytes, maxQueuedAnswers, maxQueued)
	}
	c.w.mu.Unlock()
}
