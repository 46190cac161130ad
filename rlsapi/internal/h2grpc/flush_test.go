package h2grpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Answers an AsyncHandler gives on the reader are written by the reader before it
// reads again, not by waking the writer's loop for each: calls one after another on
// one connection cost the loop (nearly) no writes.
func TestTheReaderWritesItsOwnAnswers(t *testing.T) {
	f, _, _ := asyncFixture(t)
	cl := f.dial(t)
	const calls = 50
	for i := 0; i < calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Check(ctx, &healthpb.HealthCheckRequest{Service: "now"})
		cancel()
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("call %d: %v, %v; want SERVING", i, resp, err)
		}
	}
	f.srv.mu.Lock()
	var loop int64
	for c := range f.srv.conns {
		loop += c.w.loopWrites.Load()
	}
	f.srv.mu.Unlock()
	if loop > calls/5 {
		t.Fatalf("the writer's loop wrote %d times for %d calls answered on the reader; want at most %d", loop, calls, calls/5)
	}
}

// What the socket does not take of a flush is written by the loop before anything
// queued after it: a client that reads only later gets every frame whole and in order.
func TestAFlushTheSocketTakesInPartGoesOnInOrder(t *testing.T) {
	client, server := tcpPair(t)
	server.(*net.TCPConn).SetWriteBuffer(4096) // the socket soon takes a flush only in part
	w := newWriter(server, 10*time.Second)
	if w.raw == nil {
		t.Fatal("a TCP connection has no socket to write to without waiting")
	}
	go w.loop()
	defer func() { w.close(); <-w.done }()

	// Rounds of frames as a reader queues them between reads, each flushed as it
	// flushes them before it reads again, while the client reads nothing: the first
	// rounds the socket takes whole, one in part, and the loop the rest, after which
	// the loop, its write waiting for the client, is left every later round.
	const frames, perRound = 120, 10 // less than maxQueued in all: queuing never waits
	payload := make([]byte, 6000)
	waitLoopIdle(t, w) // a flush writes only while the loop waits for frames
	for i := 0; i < frames; i++ {
		if i%perRound == 0 {
			w.mu.Lock()
			w.readerWrites = true
			w.mu.Unlock()
		}
		binary.BigEndian.PutUint32(payload, uint32(i))
		for j := 4; j < len(payload); j++ {
			payload[j] = byte(i + j)
		}
		if err := w.control(http2.FrameData, 0, 1, payload); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if i%perRound == perRound-1 {
			w.flush()
		}
	}
	got := make(chan error, 1)
	go func() { got <- readNumberedFrames(client, frames) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not get every frame within 20s")
	}
	// Counted once a write returns: the loop's last waited for the client to read.
	if w.loopWrites.Load() == 0 {
		t.Fatal("the socket took every flush whole: nothing was left for the loop")
	}
}

// waitLoopIdle waits until w's loop, started, waits for frames.
func waitLoopIdle(t *testing.T, w *writer) {
	t.Helper()
	wait.For(t, 5*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.idle {
			return errors.New("the writer's loop does not wait for frames")
		}
		return nil
	})
}

// readNumberedFrames reads n DATA frames and checks each is the next, whole.
func readNumberedFrames(nc net.Conn, n int) error {
	fr := http2.NewFramer(nil, bufio.NewReader(nc))
	for i := 0; i < n; i++ {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		d, ok := f.(*http2.DataFrame)
		if !ok {
			return fmt.Errorf("frame %d: %T, want DATA", i, f)
		}
		p := d.Data()
		if got := binary.BigEndian.Uint32(p); got != uint32(i) || len(p) != 6000 {
			return fmt.Errorf("frame %d: got frame %d of %d bytes", i, got, len(p))
		}
		for j := 4; j < len(p); j++ {
			if p[j] != byte(i+j) {
				return fmt.Errorf("frame %d: byte %d is %d, want %d", i, j, p[j], byte(i+j))
			}
		}
	}
	return nil
}
