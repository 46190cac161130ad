package respapi

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// One huge argument gets an error and the connection closes; the server goes on.
func TestHugeArgumentIsRefused(t *testing.T) {
	addr := startServer(t, func(c *Config) { c.MaxUnanswered = 64 << 10 }).addr
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	huge := strings.Repeat("x", 1<<20)
	go fmt.Fprintf(nc, "*3\r\n$7\r\nSW.INCR\r\n$%d\r\n%s\r\n$3\r\n60s\r\n", len(huge), huge)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(nc).ReadString('\n')
	if !strings.HasPrefix(line, "-ERR Protocol error: request too large") {
		t.Fatalf("got %q; want -ERR Protocol error: request too large", line)
	}
	// Other clients are unaffected, and long pipelines of small commands are fine.
	nc2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("*3\r\n$7\r\nSW.INCR\r\n$1\r\nk\r\n$3\r\n60s\r\n")
	}
	go nc2.Write([]byte(b.String()))
	r := bufio.NewReader(nc2)
	nc2.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := 1; i <= 5000; i++ {
		line, err := r.ReadString('\n')
		if err != nil || line != fmt.Sprintf(":%d\r\n", i) {
			t.Fatalf("reply %d: got %q, %v", i, line, err)
		}
	}
}
