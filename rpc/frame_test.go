package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// A length prefix claiming the largest frame, with no body behind it, costs nothing:
// the buffer grows only as bytes arrive.
func TestFrameLengthAloneCostsNothing(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		hdr := binary.BigEndian.AppendUint32(nil, MaxFrameBytes)
		client.Write(append(hdr, make([]byte, 100)...))
		client.Close()
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	buf, err := newFrameReader(server, frameStall).next(nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v; want io.ErrUnexpectedEOF", err)
	}
	if cap(buf) > readStep {
		t.Fatalf("buffer of %d bytes for 100 received; want at most %d", cap(buf), readStep)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("allocated %d bytes for a frame that never came", n)
	}
}

// A large frame arriving in pieces is read whole, and the buffer is reused.
func TestFrameReadInPieces(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	go func() {
		for i := 0; i < 2; i++ {
			for b := frame; len(b) > 0; b = b[min(len(b), 1000):] {
				client.Write(b[:min(len(b), 1000)])
			}
		}
		client.Close()
	}()
	fr := newFrameReader(server, frameStall)
	var buf []byte
	for i := 0; i < 2; i++ {
		var err error
		if buf, err = fr.next(buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, body) {
			t.Fatalf("frame %d: got %d bytes, not the %d sent", i, len(buf), len(body))
		}
	}
	if _, err := fr.next(buf); err != io.EOF {
		t.Fatalf("after the frames: got %v; want io.EOF", err)
	}
}

// startStallServer starts a server whose stall timeout is stall.
func startStallServer(t *testing.T, stall time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := &counter.Local{Store: leaparray.NewStore(), Now: func() int64 { return t0 }}
	srv := newTestServer(testHandlerFunc(func(ctx context.Context, req *testRequest, res []counter.Result) { local.DecideNow(req.Ops, res) }), nil)
	srv.stall = stall
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// readAnswer reads one answer frame from nc within 5s.
func readAnswer(nc net.Conn) error {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := newFrameReader(nc, frameStall).next(nil)
	return err
}

// A frame that stops arriving midway for longer than the stall timeout drops its
// connection. An idle connection is kept however long it idles, and a frame that
// keeps arriving, however slowly, is read.
func TestStalledFrameDropsConnection(t *testing.T) {
	const stall = 200 * time.Millisecond
	addr := startStallServer(t, stall)
	frame := appendRequestFrame(nil, 1, fwd(incr("a", 1)))
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}

	stalled, idle, slow := dial(), dial(), dial()
	start := time.Now()
	stalled.Write(frame[:len(frame)-3])
	for i := 0; i < len(frame); i++ { // one byte every stall/4: slower in all than the stall timeout
		slow.Write(frame[i : i+1])
		time.Sleep(stall / 4)
	}
	if err := readAnswer(slow); err != nil {
		t.Fatalf("a frame sent slowly (%v in all): %v", time.Since(start), err)
	}
	var ne net.Error
	if err := readAnswer(stalled); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a frame stalled for %v: got %v; want the connection dropped after %v", time.Since(start), err, stall)
	}
	idle.Write(frame)
	if err := readAnswer(idle); err != nil {
		t.Fatalf("a connection idle for %v: %v", time.Since(start), err)
	}
}
