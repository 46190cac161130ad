package node_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// --max-clients caps the HTTP listener as well as RESP's: a connection over it gets a
// bare 503 and is closed; RESP and the shared AUTH budget are wired in too.
func TestFrontEndLimits(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := nodetest.MakeCluster(t, 1, func(c *node.Config) {
		c.MaxClients, c.TokenFile = 1, tokenFile
		c.AuthGuesses.Every = time.Hour // no guess comes back while the test runs, however slow the host
	}).Nodes[0]

	first := dialHTTP(t, n.HTTPAddr())
	if got := first.get(t, "/v1/count?key=a&window=1m", "s3cret"); got.StatusCode != http.StatusOK {
		t.Fatalf("with the token from --token-file: got %d; want 200", got.StatusCode)
	}
	over := dialHTTP(t, n.HTTPAddr())
	resp, err := http.ReadResponse(over.rd, nil)
	if err != nil {
		t.Fatalf("connection over --max-clients: %v; want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close ||
		!strings.Contains(string(body), "max number of clients reached") {
		t.Fatalf("connection over --max-clients: got %d %v %q; want 503, Connection: close", resp.StatusCode, resp.Header, body)
	}
	metrics := first.get(t, "/metrics", "s3cret")
	text, _ := io.ReadAll(metrics.Body)
	for _, line := range []string{"leapcount_http_connections_refused_total 1", "leapcount_resp_connections_refused_total 0"} {
		if !strings.Contains(string(text), line+"\n") {
			t.Fatalf("metrics lack %q", line)
		}
	}

	// RESP: one client; a wrong AUTH there spends the budget HTTP shares.
	resp1 := dialHTTP(t, n.RESPAddr())
	fmt.Fprint(resp1.conn, "AUTH wrong\r\n")
	if line, _ := resp1.rd.ReadString('\n'); !strings.HasPrefix(line, "-WRONGPASS") {
		t.Fatalf("AUTH wrong: got %q; want WRONGPASS", line)
	}
	resp2 := dialHTTP(t, n.RESPAddr())
	if line, _ := resp2.rd.ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("second RESP client: got %q; want max number of clients reached", line)
	}
	for range 9 { // burst 10, one spent on RESP
		if got := first.get(t, "/v1/count?key=a&window=1m", "wrong"); got.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token: got %d; want 401", got.StatusCode)
		}
	}
	if got := first.get(t, "/v1/count?key=a&window=1m", "wrong"); got.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a wrong token after 10 wrong tokens over RESP and HTTP: got %d; want 429", got.StatusCode)
	}
	// A right token is never refused (before, it was refused with 429 too).
	if got := first.get(t, "/v1/count?key=a&window=1m", "s3cret"); got.StatusCode != http.StatusOK {
		t.Fatalf("the right token after 10 wrong tokens over RESP and HTTP: got %d; want 200", got.StatusCode)
	}
	fmt.Fprint(resp1.conn, "AUTH s3cret\r\n")
	if line, _ := resp1.rd.ReadString('\n'); line != "+OK\r\n" {
		t.Fatalf("AUTH with the right token over budget: got %q; want +OK", line)
	}
}

type rawConn struct {
	conn net.Conn
	rd   *bufio.Reader
}

func dialHTTP(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return &rawConn{conn: conn, rd: bufio.NewReader(conn)}
}

// get sends one keep-alive request with the bearer token and reads its answer.
func (c *rawConn) get(t *testing.T, path, token string) *http.Response {
	t.Helper()
	fmt.Fprintf(c.conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}
