package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// laterHandler decides every frame later, from one goroutine (as a lease's wake
// completes the ops parked on it): done must never wait for the peer.
type laterHandler struct {
	dones            chan func()
	entered, replied atomic.Int64
}

func (h *laterHandler) Handle(context.Context, *testRequest, []counter.Result) {}

func (h *laterHandler) HandleAsync(_ context.Context, req *testRequest, res []counter.Result, done func()) {
	h.entered.Add(1)
	for i := range res {
		res[i] = counter.Result{Count: int64(i)}
	}
	h.dones <- done
}

func (h *laterHandler) run() {
	for done := range h.dones {
		done()
		h.replied.Add(1)
	}
}

// A peer that sends op frames as fast as it can and never reads its answers gets its
// connection closed once they pass the server's bound, while the goroutine that
// completes the frames goes on at once: before, each completion wrote the answer
// itself, waiting for the peer up to the write timeout.
func TestCompletionsNeverWaitForAPeerThatDoesNotRead(t *testing.T) {
	h := &laterHandler{dones: make(chan func(), 1<<16)}
	go h.run()
	t.Cleanup(func() { close(h.dones) })
	srv := newTestServer(h, nil)
	srv.writeTO = time.Minute // what a completion that writes would wait for
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ops := make([]counter.Op, 256)
	for i := range ops {
		ops[i] = counter.Op{Kind: counter.Incr, Key: strings.Repeat("k", 8), Window: 1000, Buckets: 10, N: 1}
	}
	go func() {
		var b []byte
		for id := uint64(1); ; id++ {
			b = appendRequestFrame(b[:0], id, testRequest{Ops: ops})
			nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := nc.Write(b); err != nil {
				return
			}
		}
	}()
	err = wait.Until(20*time.Second, func() error {
		srv.mu.Lock()
		conns := len(srv.conns)
		srv.mu.Unlock()
		if r, e := h.replied.Load(), h.entered.Load(); conns != 0 || r != e {
			return fmt.Errorf("%d connections open; %d of %d frames completed", conns, r, e)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v: a completion waits for the peer", err)
	}
	t.Logf("%d frames completed, connection closed", h.entered.Load())
}
