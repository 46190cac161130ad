package node_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// Request bodies that never end (chunked, the first chunk sent and then nothing) are
// cut off at the read timeout: each gets 408 and its connection is closed, so a client
// cannot hold connections open by never finishing its requests.
func TestHTTPCutsOffBodiesThatNeverEnd(t *testing.T) {
	const readTimeout, conns = 500 * time.Millisecond, 20
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) { cfg.HTTPReadTimeout = readTimeout })
	addr := c.Nodes[0].HTTPAddr()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := neverEndingBody(addr, readTimeout); err != nil {
				t.Errorf("connection %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// neverEndingBody starts a chunked POST, never finishes it, and checks that the server
// answers 408 and closes the connection within the read timeout (and a margin for a
// loaded machine), not before.
func neverEndingBody(addr string, readTimeout time.Duration) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /v1/incr HTTP/1.1\r\nHost: leapcount\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n8\r\n{\"key\":\"\r\n"); err != nil {
		return err
	}
	conn.SetReadDeadline(start.Add(readTimeout + 5*time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		return fmt.Errorf("status: got %d; want %d", resp.StatusCode, http.StatusRequestTimeout)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("after the answer: got %v; want the connection closed (EOF)", err)
	}
	if took := time.Since(start); took < readTimeout*9/10 {
		return fmt.Errorf("cut off after %v; want no sooner than the read timeout %v", took, readTimeout)
	}
	return nil
}

// A request whose headers pass the cap (64 KiB) gets 431; one well within it is served.
func TestHTTPCapsHeaderBytes(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	url := "http://" + c.Nodes[0].HTTPAddr() + "/healthz"
	for _, tc := range []struct {
		bytes, want int
	}{{32 << 10, http.StatusOK}, {80 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Filler", strings.Repeat("a", tc.bytes))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d-byte header: %v", tc.bytes, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d-byte header: got %d; want %d", tc.bytes, resp.StatusCode, tc.want)
		}
	}
}

// --max-body-bytes is what README says: at least 1024 (less stops the start), the cap
// of an HTTP body, and on RESP the cap of what a client sends unanswered only from
// 1 MiB up: a smaller value leaves RESP its 1 MiB, the room pipelines need while their
// commands wait for a forward.
func TestMaxBodyBytesAsREADMESays(t *testing.T) {
	cfg := (&nodetest.Cluster{Clock: nodetest.NewClock()}).Config("node-0")
	cfg.MaxBodyBytes = 1023
	if n, err := node.Start(cfg); err == nil || !strings.Contains(err.Error(), "max-body-bytes") || !strings.Contains(err.Error(), "at least 1024") {
		if n != nil {
			n.Stop(context.Background())
		}
		t.Fatalf("--max-body-bytes 1023: %v; want refused, at least 1024", err)
	}
	n := nodetest.MakeCluster(t, 1, func(c *node.Config) { c.MaxBodyBytes, c.MaxKeyBytes = 1024, 8192 }).Nodes[0]
	key := strings.Repeat("k", 4000)
	resp, err := http.Post("http://"+n.HTTPAddr()+"/v1/incr", "application/json", strings.NewReader(`{"key":"`+key+`","window":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 4 KB HTTP body with --max-body-bytes 1024: %d; want 413", resp.StatusCode)
	}
	conn, err := net.DialTimeout("tcp", n.RESPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "*3\r\n$7\r\nSW.INCR\r\n$%d\r\n%s\r\n$2\r\n1m\r\n", len(key), key)
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != ":1\r\n" {
		t.Fatalf("a 4 KB RESP command with --max-body-bytes 1024: %q, %v; want :1 (RESP's cap is at least 1 MiB)", line, err)
	}
}
