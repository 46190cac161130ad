package node_test

import (
	"bufio"
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
