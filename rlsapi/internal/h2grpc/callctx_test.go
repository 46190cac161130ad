package h2grpc

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// Without Done ever asked for, the deadline still shows in Err, and a cancel at once.
func TestCallCtxEndsWithoutATimer(t *testing.T) {
	var c callCtx
	c.start(context.Background(), 20*time.Millisecond)
	if err := c.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	dl, ok := c.Deadline()
	if !ok || time.Until(dl) > 20*time.Millisecond {
		t.Fatalf("Deadline %v %v; want within 20ms", dl, ok)
	}
	for c.Err() == nil && time.Now().Before(dl.Add(time.Second)) {
		time.Sleep(time.Millisecond)
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done asked for after the deadline is not closed")
	}

	var d callCtx
	d.start(context.Background(), 0)
	d.cancel()
	if err := d.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err after cancel: %v", err)
	}
	<-d.Done() // closed: made after the cancel
}

// Done, once asked for, closes at the deadline, on a cancel, and when the connection's
// context ends.
func TestCallCtxDoneCloses(t *testing.T) {
	var c callCtx
	c.start(context.Background(), 10*time.Millisecond)
	<-c.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err %v", c.Err())
	}

	var d callCtx
	d.start(context.Background(), time.Hour)
	done := d.Done()
	d.cancel()
	<-done
	if !errors.Is(d.Err(), context.Canceled) {
		t.Fatalf("Err %v", d.Err())
	}

	conn, closeConn := context.WithCancel(context.Background())
	var e callCtx
	e.start(conn, 0)
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	closeConn()
	if !errors.Is(e.Err(), context.Canceled) {
		t.Fatalf("Err after the connection's context ended: %v", e.Err())
	}
	<-e.Done()
}

// A context derived from a call's joins it as the context package's children do: it
// ends with it, and no goroutine watches it (the package starts one per child of a
// context it does not know).
func TestCallCtxChildrenJoinWithoutGoroutines(t *testing.T) {
	var c callCtx
	c.start(context.Background(), time.Hour)
	before := runtime.NumGoroutine()
	children := make([]context.Context, 100)
	for i := range children {
		var cancel context.CancelFunc
		children[i], cancel = context.WithTimeout(&c, time.Hour)
		defer cancel()
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Fatalf("%d more goroutines after deriving 100 contexts", n)
	}
	c.cancel()
	for i, child := range children {
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("child %d not ended 5s after its parent", i)
		}
	}
}

// BenchmarkCallContext is a call's context made, read as rlsapi reads it (Deadline,
// Err) and ended, against context.WithTimeout.
func BenchmarkCallContext(b *testing.B) {
	conn, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("callCtx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := new(callCtx)
			c.start(conn, 2*time.Second)
			c.Deadline()
			if c.Err() != nil {
				b.Fatal(c.Err())
			}
			c.cancel()
		}
	})
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(conn, 2*time.Second)
			ctx.Deadline()
			if ctx.Err() != nil {
				b.Fatal(ctx.Err())
			}
			cancel()
		}
	})
}
