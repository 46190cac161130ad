package node_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// --http-tls serves HTTP/2 to a client that offers it by ALPN (net/http's own, on the
// node's TLS listener), and HTTP/1.1 to one that does not: Go's client, and curl
// --http2 when installed. Before, the port offered only http/1.1.
func TestHTTPTLSServesHTTP2(t *testing.T) {
	tn := startTLSNode(t, false, nil)
	url := "https://" + tn.n.HTTPTLSAddr()
	for _, c := range []struct {
		name  string
		h2    bool
		major int
	}{{"h2 offered", true, 2}, {"http/1.1 only", false, 1}} {
		tr := &http.Transport{TLSClientConfig: goTLS(t, tn.pool, nil), ForceAttemptHTTP2: c.h2}
		if !c.h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no h2
		}
		cl := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		resp, err := cl.Post(url+"/v1/incr", "application/json", strings.NewReader(`{"key":"h2","window":"1h"}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != c.major || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), `{"key":"h2","count":`) {
			t.Fatalf("%s: %s %d %q; want HTTP/%d 200 and a count", c.name, resp.Proto, resp.StatusCode, body, c.major)
		}
		tr.CloseIdleConnections()
	}
	t.Run("curl", func(t *testing.T) {
		curl := tool(t, "curl", "Debian's curl")
		out, err := run(t, curl, "-sS", "--http2", "--cacert", tn.ca.File, "-o", "/dev/null", "-w", "%{http_version}", url+"/readyz")
		if err != nil || out != "2" {
			t.Fatalf("curl --http2: HTTP version %q, %v; want 2", out, err)
		}
	})
}
