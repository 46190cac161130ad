package h2grpc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// An AsyncHandler's reply comes on a goroutine that serves others too (in a node, the
// reader of a peer's answers): it must never wait for the client. A client that opens
// its windows wide, sends calls as fast as it can and never reads gets its connection
// closed once its answers pass the writer's bound, while the goroutine that replies
// goes on at once; before, each reply waited for queue room, up to WriteTimeout.
func TestRepliesNeverWaitForAClientThatDoesNotRead(t *testing.T) {
	const answer = 32 << 10
	replies := make(chan func(), 1<<16)
	var entered, done atomic.Int64
	f := start(t, func(cfg *Config) {
		cfg.WriteTimeout = time.Minute // what a reply that waits would wait for
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			entered.Add(1)
			out := append(c.Out, make([]byte, answer)...)
			replies <- func() { reply(out, nil) }
		}}
	})
	// One goroutine replies to every call in turn, as a peer's reader completes forwards.
	go func() {
		for r := range replies {
			r()
			done.Add(1)
		}
	}()
	t.Cleanup(func() { close(replies) })

	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go floodWithoutReading(nc)
	// First the server takes the connection and its calls in (until then it counts none,
	// which the wait below would take for the end).
	wait.For(t, 20*time.Second, func() error {
		if entered.Load() == 0 {
			return fmt.Errorf("no call taken in yet (%d connections)", connCount(f.srv))
		}
		return nil
	})
	err = wait.Until(20*time.Second, func() error {
		if n := connCount(f.srv); n != 0 {
			return fmt.Errorf("the server still has %d connections; replies %d of %d calls", n, done.Load(), entered.Load())
		}
		if d, e := done.Load(), entered.Load(); d != e {
			return fmt.Errorf("replied to %d of %d calls", d, e)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v: a reply waits for the client", err)
	}
	if e := entered.Load(); e*answer < maxQueued {
		t.Fatalf("only %d calls (%d bytes of answers) came before the connection closed; the test proves nothing", e, e*answer)
	}
	t.Logf("%d calls replied to, connection closed", entered.Load())
}

// floodWithoutReading sends Health/Check calls on nc with the windows opened wide until
// a write fails, and never reads.
func floodWithoutReading(nc net.Conn) {
	fr := http2.NewFramer(nc, nil)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return
	}
	if fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}) != nil ||
		fr.WriteWindowUpdate(0, 1<<31-1-65535) != nil {
		return
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", checkMethod}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	for id := uint32(1); id < 1<<31; id += 2 {
		nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}) != nil ||
			fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}) != nil {
			return
		}
	}
}

// connCount is how many connections s serves.
func connCount(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
