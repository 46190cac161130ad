package connlimit

import (
	"bufio"
	"net"
	"syscall"
	"testing"
	"time"
)

func listen(t *testing.T, max int) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, max, "full\n")
	t.Cleanup(func() { l.Close() })
	return l
}

// accepted accepts n connections in the background and returns them on a channel.
func accepted(l *Listener) chan net.Conn {
	ch := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}
	}()
	return ch
}

func dial(t *testing.T, l *Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOverTheCapIsRefusedWithItsMessage(t *testing.T) {
	l := listen(t, 2)
	ch := accepted(l)
	dial(t, l)
	dial(t, l)
	a, b := <-ch, <-ch
	third := dial(t, l)
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(third).ReadString('\n')
	if err != nil || line != "full\n" {
		t.Fatalf("third connection read %q, %v; want the refusal", line, err)
	}
	if got := l.Refused(); got != 1 {
		t.Fatalf("Refused() = %d; want 1", got)
	}
	if got := l.Open(); got != 2 {
		t.Fatalf("Open() = %d; want 2", got)
	}
	// Closing one (twice: the place is given back once) makes room for the next.
	a.Close()
	a.Close()
	if got := l.Open(); got != 1 {
		t.Fatalf("Open() after a close = %d; want 1", got)
	}
	dial(t, l)
	select {
	case c := <-ch:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection within the cap was not accepted")
	}
	b.Close()
}

func TestNoCap(t *testing.T) {
	l := listen(t, 0)
	ch := accepted(l)
	for i := 0; i < 20; i++ {
		dial(t, l)
		<-ch
	}
	if got := l.Refused(); got != 0 {
		t.Fatalf("Refused() = %d; want 0", got)
	}
}

// An accepted connection lends its socket (a server writes to it without waiting),
// and closing it still gives its place back.
func TestAcceptedConnectionLendsItsSocket(t *testing.T) {
	l := listen(t, 1)
	ch := accepted(l)
	dial(t, l)
	c := <-ch
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("an accepted %T is not a syscall.Conn", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("the socket's descriptor: %d, %v", fd, err)
	}
	c.Close()
	if got := l.Open(); got != 0 {
		t.Fatalf("Open() = %d after Close; want 0", got)
	}
}
