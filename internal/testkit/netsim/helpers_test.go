package netsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// long bounds waits for things that must happen; quiet is how long a test watches for
// something that must not happen (bytes on a blocked link): a non-event needs a span.
const (
	long  = 5 * time.Second
	quiet = 50 * time.Millisecond
)

// netsimFrame matches a stack frame in this package's non-test code.
var netsimFrame = regexp.MustCompile(`/internal/netsim/(\w+)\.go:`)

// noLeaks fails the test if, once its other cleanups (registered later, so run
// earlier) are done, some goroutine is still inside netsim: a Read, Write, Accept or
// dial that Close did not end.
func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		err := wait.Until(long, func() error {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			for _, g := range strings.Split(string(buf), "\n\n") {
				for _, m := range netsimFrame.FindAllStringSubmatch(g, -1) {
					if !strings.HasSuffix(m[1], "_test") {
						return fmt.Errorf("goroutine left in netsim:\n%s", g)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// listen listens at addr and closes the listener when the test ends.
func listen(t *testing.T, n *Network, addr string) net.Listener {
	t.Helper()
	ln, err := n.Listen(addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// connect dials from host fromHost to a new listener at addr and returns both ends,
// closed when the test ends.
func connect(t *testing.T, n *Network, fromHost, addr string) (client, server net.Conn) {
	t.Helper()
	ln := listen(t, n, addr)
	client = dial(t, n, fromHost, ln.Addr().String())
	server, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

func dial(t *testing.T, n *Network, fromHost, addr string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	c, err := n.Dialer(fromHost)(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, fromHost, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// reachable reports whether a dial from fromHost to addr connects within quiet; a
// dial that times out is unreachable, any other error fails the test.
func reachable(t *testing.T, n *Network, fromHost, addr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	c, err := n.Dialer(fromHost)(ctx, addr)
	if err == nil {
		c.Close()
		return true
	}
	if !isTimeout(err) {
		t.Fatalf("dial %s from %s: got %v; want success or a timeout", addr, fromHost, err)
	}
	return false
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(long))
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// readString reads exactly len(want) bytes within long and compares them.
func readString(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(long))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("read %q; want %q", got, want)
	}
}

// readNothing checks that no byte arrives within quiet.
func readNothing(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); !isTimeout(err) {
		t.Fatalf("read %q, %v; want a timeout (nothing delivered)", buf[:n], err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
