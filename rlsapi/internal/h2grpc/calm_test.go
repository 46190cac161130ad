package h2grpc

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/leapcount/leapcount/internal/testkit/hostile"
)

// Every flood of frames that carry no call, and calls opened and reset at once, is
// sent GOAWAY ENHANCE_YOUR_CALM and closed (calm.go). Before, each was answered for
// as long as the client sent: a PING or SETTINGS flood with an acknowledgement each,
// a header block of empty CONTINUATIONs until the idle timeout (5 min).
func TestFloodsAreToldToCalmDownAndClosed(t *testing.T) {
	f := start(t, nil)
	for _, a := range hostile.H2Attacks {
		if a == hostile.AbandonedStreams {
			continue // TestAbandonedStreamsAreAnsweredAndTheConnectionClosed
		}
		t.Run(string(a), func(t *testing.T) {
			nc, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			go a.Run(nc, checkMethod)
			code, goAway, closed := hostile.Outcome(nc, 10*time.Second)
			if !closed || !goAway || code != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("closed %v, GOAWAY %v (%v); want GOAWAY ENHANCE_YOUR_CALM and a close", closed, goAway, code)
			}
		})
	}
}

// A flood that arrives with the client's first SETTINGS, in the same read as the
// handshake's (an attacker faster than the node, or the node slow to read), is told to
// calm down too: the budget is counted as bytes arrive (calm.go), so its error must
// come after the handshake's frame, not in place of it (the handshake would close
// the connection with no GOAWAY).
func TestAFloodWithTheHandshakeIsToldToCalmDown(t *testing.T) {
	f := start(t, nil)
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b := []byte(http2.ClientPreface)
	for range 400 { // the first SETTINGS and 399 more: twice the budget
		b = append(b, 0, 0, 0, byte(http2.FrameSettings), 0, 0, 0, 0, 0)
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	code, goAway, closed := hostile.Outcome(nc, 10*time.Second)
	if !closed || !goAway || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("closed %v, GOAWAY %v (%v); want GOAWAY ENHANCE_YOUR_CALM and a close", closed, goAway, code)
	}
}

// Calls opened and never sent a byte more are answered DEADLINE_EXCEEDED at their
// RequestTimeout, and the silent connection closed (stall.go): 128 of them at most.
func TestAbandonedStreamsAreAnsweredAndTheConnectionClosed(t *testing.T) {
	f := start(t, func(cfg *Config) { cfg.RequestTimeout = 200 * time.Millisecond })
	nc, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go hostile.AbandonedStreams.Run(nc, checkMethod)
	if _, _, closed := hostile.Outcome(nc, 5*time.Second); !closed {
		t.Fatal("a connection of abandoned calls stayed open")
	}
}

// A gRPC client's own frames never run a connection's budget out: many calls at
// once on one connection (grpc-go sends a BDP ping as answers come, and cancels
// calls), and a keepalive ping now and then.
func TestBusyClientsAreNotToldToCalmDown(t *testing.T) {
	f := start(t, nil)
	c := f.dial(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := range 400 {
				ctx, cancel := context.WithCancel(context.Background())
				if i%10 == 0 {
					cancel() // a call cancelled: its RST_STREAM, maybe before its answer
				}
				_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
				cancel()
				if err != nil && i%10 != 0 {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}
