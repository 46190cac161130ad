package chaos_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
)

// The RESP port of a node with a token, attacked by clients that never authenticate:
// 50 connections each send one multibulk header claiming 2^63−1 or 2^31−1 arguments and
// nothing more (22 and 13 bytes). Each must be answered with a protocol error and
// dropped at once; the node must go on answering SW.INCR exactly, use little CPU over
// the attack, and stop on SIGTERM.
func TestRESPHugeMultibulkBeforeAuth(t *testing.T) {
	const token = "chaos-s3cret"
	c := proctest.StartCluster(t, 1, proctest.Options{Token: token})
	n := c.Node(0)
	cpuBefore, rssBefore := procUsage(t, n)

	attacks := []string{"*9223372036854775807\r\n", "*2147483647\r\n"}
	const conns = 50
	attackers := make([]net.Conn, conns)
	for i := range attackers {
		conn, err := net.DialTimeout("tcp", n.RESP(), 5*time.Second)
		if err != nil {
			t.Fatalf("attacker %d: dial: %v", i, err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, attacks[i%len(attacks)]); err != nil {
			t.Fatalf("attacker %d: write: %v", i, err)
		}
		attackers[i] = conn
	}
	// One deadline for all: a node that does not answer fails the test in 10s, not 500.
	deadline := time.Now().Add(10 * time.Second)
	for i, conn := range attackers {
		conn.SetReadDeadline(deadline)
		rd := bufio.NewReader(conn)
		line, err := rd.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "-ERR Protocol error: ") {
			t.Errorf("attacker %d (%q): got %q, %v; want -ERR Protocol error", i, attacks[i%len(attacks)], line, err)
			continue
		}
		if b, err := rd.ReadByte(); err != io.EOF {
			t.Errorf("attacker %d: after the error got %q, %v; want the connection closed", i, b, err)
		}
	}

	cl := dialRESP(t, n.RESP())
	if got := cl.do("AUTH", token); got != "+OK" {
		t.Fatalf("AUTH: got %q; want +OK", got)
	}
	for i := 1; i <= 3; i++ {
		if got, want := cl.do("SW.INCR", "after-attack", "1m"), fmt.Sprintf(":%d", i); got != want {
			t.Fatalf("SW.INCR %d: got %q; want %q", i, got, want)
		}
	}
	cl.conn.Close()

	cpuAfter, rssAfter := procUsage(t, n)
	t.Logf("over the attack: CPU %v, RSS %+d KiB", cpuAfter-cpuBefore, (rssAfter-rssBefore)>>10)
	if grew := cpuAfter - cpuBefore; grew > 2*time.Second {
		t.Errorf("node used %v of CPU over the attack; want under 2s", grew)
	}
	if grew := rssAfter - rssBefore; grew > 64<<20 {
		t.Errorf("node's RSS grew by %d MiB over the attack; want under 64 MiB", grew>>20)
	}
	n.Stop()
}

func procUsage(t *testing.T, n *proctest.Node) (time.Duration, int64) {
	t.Helper()
	cpu, err := n.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	rss, err := n.RSS()
	if err != nil {
		t.Fatal(err)
	}
	return cpu, rss
}

// rawRESP sends commands as RESP arrays and reads one-line replies (+, -, :).
type rawRESP struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *rawRESP {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawRESP{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

func (c *rawRESP) do(args ...string) string {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		c.t.Fatalf("%v: write: %v", args, err)
	}
	line, err := c.rd.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatalf("%v: read: %v", args, err)
	}
	return strings.TrimSuffix(line, "\r\n")
}
