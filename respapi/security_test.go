package respapi

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/authlimit"
	waitfor "github.com/leapcount/leapcount/internal/testkit/wait"
)

// Each hostile shape is answered with Redis's protocol error and the connection closed
// at once, before AUTH; the commands sent before it are answered; the server goes on.
func TestHostileFramingIsRefused(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Token = "s3cret" })
	for _, c := range []struct{ name, in, want string }{
		{"count 2^63-1", "*9223372036854775807\r\n", "invalid multibulk length"},
		{"count 2^31-1", "*2147483647\r\n", "invalid multibulk length"},
		{"count over the max", fmt.Sprintf("*%d\r\n", maxArgs+1), "invalid multibulk length"},
		{"count -2", "*-2\r\n", "invalid multibulk length"},
		{"count line of zeros", "*" + strings.Repeat("0", 100), "too big mbulk count string"},
		{"not a bulk", "*1\r\n:1\r\n", "expected '$', got ':'"},
		{"bulk negative", "*1\r\n$-5\r\n", "invalid bulk length"},
		{"bulk over the cap", fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n", DefaultMaxUnanswered+1), "request too large"},
		{"bulk line of zeros", "*1\r\n$" + strings.Repeat("0", 100), "too big bulk count string"},
		{"bulk without CRLF", "*1\r\n$4\r\nPINGPONG", "invalid bulk length"},
		{"inline line too long", strings.Repeat("x", maxInline+1), "too big inline request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := ts.dial(t)
			cl.write(encode("PING") + "PING\r\n" + c.in)
			wantReply(t, cl.reply(), "-NOAUTH Authentication required.")
			wantReply(t, cl.reply(), "-NOAUTH Authentication required.")
			wantReply(t, cl.reply(), "-ERR Protocol error: "+c.want)
			cl.wantClosed()
		})
	}
	// "*0" and "*-1" (which Redis skips) the guard passes whole; they are refused as
	// redcon refused them, and count as protocol drops too.
	for _, in := range []string{"*0\r\n", "*-1\r\n"} {
		cl := ts.dial(t)
		cl.write(in)
		wantReply(t, cl.reply(), "-ERR Protocol error: invalid multibulk length")
		cl.wantClosed()
	}
	waitfor.For(t, 5*time.Second, func() error {
		if got := ts.metric(t, "leapcount_resp_connections_dropped_total", "reason", "protocol"); got != 13 {
			return fmt.Errorf("got %v connections dropped for their framing; want 13", got)
		}
		return nil
	})
	cl := ts.dial(t)
	wantReply(t, cl.do("AUTH", "s3cret"), "+OK")
	cl.wantServes()
}

// A client that sends many arguments, each within the cap, and no reply in between,
// is stopped at MaxUnanswered bytes.
func TestUnansweredBytesAreCapped(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxUnanswered = 64 << 10 })
	cl := ts.dial(t)
	arg := fmt.Sprintf("$%d\r\n%s\r\n", 16<<10, strings.Repeat("a", 16<<10))
	go io.WriteString(cl.conn, "*9\r\n$4\r\nECHO\r\n"+strings.Repeat(arg, 8)) // 128 KiB
	wantReply(t, cl.reply(), "-ERR Protocol error: request too large")
	cl.wantClosed()
}

func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.IdleTimeout = idle })
	start := time.Now()
	quiet, midCommand, busy := ts.dial(t), ts.dial(t), ts.dial(t)
	wantReply(t, quiet.do("PING"), "+PONG")
	midCommand.write("*2\r\n$4\r\nECHO\r\n$10\r\nabc")
	// A client that keeps talking stays, however long.
	for time.Since(start) < 4*idle {
		wantReply(t, busy.do("PING"), "+PONG")
		time.Sleep(idle / 4) // the client's pace, not a wait for a condition
	}
	quiet.wantClosed()
	midCommand.wantClosed()
	if got := time.Since(start); got < idle {
		t.Fatalf("closed after %v; want at least the idle timeout %v", got, idle)
	}
	waitfor.For(t, 5*time.Second, func() error {
		if got := ts.metric(t, "leapcount_resp_connections_dropped_total", "reason", "idle"); got != 2 {
			return fmt.Errorf("got %v connections dropped idle; want 2", got)
		}
		return nil
	})
}

func TestUnauthenticatedDeadline(t *testing.T) {
	const authIn = 300 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.Token, c.AuthTimeout = "s3cret", authIn })
	start := time.Now()
	talker, authed, hello := ts.dial(t), ts.dial(t), ts.dial(t)
	wantReply(t, authed.do("AUTH", "s3cret"), "+OK")
	if got := hello.do("HELLO", "2", "AUTH", "default", "s3cret"); !helloReply.MatchString(got) {
		t.Fatalf("HELLO 2 AUTH: got %s", got)
	}
	// Talking is not enough: the deadline holds until the client authenticates.
	for time.Since(start) < authIn/2 {
		wantReply(t, talker.do("PING"), "-NOAUTH Authentication required.")
		time.Sleep(authIn / 10) // the client's pace
	}
	talker.wantClosed()
	if got := time.Since(start); got < authIn {
		t.Fatalf("closed after %v; want at least %v", got, authIn)
	}
	for time.Since(start) < 3*authIn { // the others stay
		wantReply(t, authed.do("PING"), "+PONG")
		wantReply(t, hello.do("PING"), "+PONG")
		time.Sleep(authIn / 4) // the clients' pace
	}
	wantReply(t, authed.do("PING"), "+PONG")
	wantReply(t, hello.do("PING"), "+PONG")
	waitfor.For(t, 5*time.Second, func() error {
		if got := ts.metric(t, "leapcount_resp_connections_dropped_total", "reason", "unauthenticated"); got != 1 {
			return fmt.Errorf("got %v connections dropped unauthenticated; want 1", got)
		}
		return nil
	})
}

func TestMaxClients(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxClients = 2 })
	a, b := ts.dial(t), ts.dial(t)
	wantReply(t, a.do("PING"), "+PONG")
	wantReply(t, b.do("PING"), "+PONG")
	over := ts.dial(t)
	wantReply(t, over.reply(), "-ERR max number of clients reached")
	over.wantClosed()
	if got := ts.metric(t, "leapcount_resp_connections_refused_total"); got != 1 {
		t.Fatalf("got %v refused connections; want 1", got)
	}
	a.conn.Close()
	waitfor.For(t, 5*time.Second, func() error { // the server sees a's close in its own time
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, encode("PING")); err != nil {
			return err
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got, err := readReply(bufio.NewReader(conn)); got != "+PONG" {
			return fmt.Errorf("PING after a client left: got %q, %v", got, err)
		}
		return nil
	})
	wantReply(t, b.do("PING"), "+PONG")
}

// A client that sends commands and never reads their replies is dropped once the
// replies fill the socket's buffers for WriteTimeout, not kept forever (even when
// they stay under maxUnwritten: TestUnreadRepliesAreBounded).
func TestWriteTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = 200 * time.Millisecond })
	cl := ts.dial(t)
	cl.conn.(*net.TCPConn).SetReadBuffer(4 << 10)     // the replies stay on the server's side
	wantDroppedUnread(t, ts, cl, 32, "write_timeout") // 8 MiB of replies
}

// wantDroppedUnread sends ECHOs of 256 KiB on cl, writes of them or until the server is
// gone, never reading, and waits for the server to drop cl for reason.
func wantDroppedUnread(t *testing.T, ts *testServer, cl *rawClient, writes int, reason string) {
	big := encode("ECHO", strings.Repeat("r", 256<<10))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // (or until the test ends and closes cl)
		defer wg.Done()
		for range writes {
			if _, err := io.WriteString(cl.conn, big); err != nil {
				return
			}
		}
	}()
	waitfor.For(t, 20*time.Second, func() error {
		if got := ts.metric(t, "leapcount_resp_connections_dropped_total", "reason", reason); got != 1 {
			return fmt.Errorf("got %v connections dropped for %s; want 1", got, reason)
		}
		if n := ts.srv.connected.Load(); n != 0 {
			return fmt.Errorf("%d connections open; want 0", n)
		}
		return nil
	})
	cl.conn.Close()
	wg.Wait()
	ts.dial(t).wantServes()
}

func TestFailedAuthIsLimited(t *testing.T) {
	clock := newClock()
	limiter := authlimit.New(authlimit.Config{Burst: 3, Every: time.Minute,
		Now: func() time.Time { return time.UnixMilli(clock.Now()) }})
	ts := startServer(t, func(c *Config) { c.Token, c.AuthLimiter = "s3cret", limiter })
	const wrongPass = "-WRONGPASS invalid username-password pair or user is disabled."
	const limited = "-ERR too many failed AUTH attempts; retry later"

	c := ts.dial(t)
	for range 5 { // right guesses cost nothing
		wantReply(t, c.do("AUTH", "s3cret"), "+OK")
	}
	wantReply(t, c.do("AUTH", "wrong"), wrongPass)
	wantReply(t, c.do("HELLO", "2", "AUTH", "default", "wrong"), wrongPass)
	wantReply(t, c.do("AUTH", "user", "wrong"), wrongPass)
	// The budget is spent: the right token still passes (it is never refused; before,
	// it was refused unchecked), a wrong one is "too many" and closes the connection.
	wantReply(t, c.do("AUTH", "s3cret"), "+OK")
	wantReply(t, c.do("AUTH", "wrong"), limited)
	c.wantClosed()
	c = ts.dial(t)
	wantReply(t, c.do("HELLO", "2", "AUTH", "default", "wrong"), limited)
	c.wantClosed()
	c = ts.dial(t)
	wantReply(t, c.do("PING"), "-NOAUTH Authentication required.")
	if r := c.do("HELLO", "2", "AUTH", "default", "s3cret"); strings.HasPrefix(r, "-") {
		t.Fatalf("over budget, HELLO with the right token: %q; want its answer", r)
	}
	wantReply(t, c.do("PING"), "+PONG")

	clock.Advance(time.Minute.Milliseconds()) // one wrong guess more
	wantReply(t, c.do("AUTH", "wrong"), wrongPass)
	wantReply(t, c.do("AUTH", "wrong"), limited)
	c.wantClosed()
	if got := ts.metric(t, "leapcount_resp_connections_dropped_total", "reason", "auth_limited"); got != 3 {
		t.Fatalf("got %v connections dropped for AUTH limits; want 3", got)
	}
}

// A client that sends commands and never reads their replies is dropped once the
// replies it left unread pass maxUnwritten, long before WriteTimeout: what it costs is
// bounded by the bytes, not by how fast it sends. (The event loop's path: a connection
// served by a goroutine stops being read while its write waits.)
func TestUnreadRepliesAreBounded(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = time.Minute })
	wantDroppedUnread(t, ts, ts.dial(t), math.MaxInt, "unread_replies")
}
