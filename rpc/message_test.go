package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/frametest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/internal/wire"
)

// A message goes on a frame of its own, its answer reaches read, and ops go on on the
// same connection. A message answered in the reader (a heartbeat) does not count as
// activity for IdleFor; one answered on a goroutine (a handoff) does.
func TestMessageRoundTrip(t *testing.T) {
	o := startOwner(t, "", echoHeartbeats)
	c := newTestClient(Config{})
	defer c.Close()
	idle := o.srv.lastFrame.Load()
	if back, err := sendEcho(c, o.addr, KindHeartbeat, "beat"); err != nil || back != "beat" {
		t.Fatalf("heartbeat: got %q, %v", back, err)
	}
	if o.srv.lastFrame.Load() != idle {
		t.Fatal("a heartbeat counted as activity: IdleFor would never grow on a member")
	}
	if back, err := sendEcho(c, o.addr, KindHandoff, "counters"); err != nil || back != "counters" {
		t.Fatalf("handoff: got %q, %v", back, err)
	}
	if o.srv.lastFrame.Load() == idle {
		t.Fatal("a handoff did not count as activity")
	}
	res := make([]counter.Result, 1)
	if err := c.Do(context.Background(), o.addr, fwd(incr("a", 1)), res); err != nil || res[0].Count != 1 {
		t.Fatalf("ops after messages: %v %+v", err, res[0])
	}
	if c.Stats().Frames != 3 {
		t.Fatalf("frames: got %d; want 3 (each message on a frame of its own)", c.Stats().Frames)
	}
}

// The error read returns is the call's; an answer read leaves malformed fails the call
// with ErrConnectionLost and drops the connection.
func TestMessageAnswerErrors(t *testing.T) {
	o := startOwner(t, "", echoHeartbeats)
	c := newTestClient(Config{})
	defer c.Close()
	refused := errors.New("refused")
	err := c.Send(context.Background(), o.addr, KindHandoff, []byte("x"), func(d *wire.Decoder) error {
		d.Rest()
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("got %v; want read's error", err)
	}
	err = c.Send(context.Background(), o.addr, KindHandoff, []byte("x"), func(d *wire.Decoder) error { return nil })
	if !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrBadFrame) {
		t.Fatalf("an answer read left bytes of: got %v; want ErrConnectionLost (ErrBadFrame)", err)
	}
	// The connection is dropped by its reader after the bad answer: a call made at that
	// moment may still go out on it and fail with it, and the next dials again.
	if err := wait.Until(5*time.Second, func() error {
		back, err := sendEcho(c, o.addr, KindHeartbeat, "again")
		if err == nil && back != "again" {
			err = fmt.Errorf("answered %q", back)
		}
		return err
	}); err != nil {
		t.Fatalf("after the dropped connection: %v", err)
	}
}

// A message of a kind the server has no handler for, or over its kind's bound, drops
// the connection; one within it is answered.
func TestMessageBounds(t *testing.T) {
	o := startOwner(t, "", echoHeartbeats)
	frame := func(k Kind, body string) []byte {
		b := append([]byte{uint8(k), 1}, body...)
		return b
	}
	if !frametest.Answered(t, o.addr, frame(KindHandoff, strings.Repeat("x", 1000))) {
		t.Fatal("the server did not answer a message within its bound")
	}
	if frametest.Answered(t, o.addr, frame(KindHandoff, strings.Repeat("x", 1<<10))) {
		t.Fatal("the server answered a message over its bound")
	}
	if frametest.Answered(t, o.addr, frame(9, "x")) {
		t.Fatal("the server answered a message of a kind it has no handler for")
	}
}
