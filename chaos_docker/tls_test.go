//go:build chaos

package chaosdocker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// TestComposeTLSExample runs the TLS example as README and docker-compose.tls.yml give
// it: certificates from scripts/dev-certs.sh, the override file on the cluster, then
// redis-cli --tls and an HTTPS client (HTTP/2) against node1's TLS ports; plaintext to
// a TLS port gets no answer.
func TestComposeTLSExample(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // the node runs as user 65534
		t.Fatal(err)
	}
	if out, err := exec.Command("../scripts/dev-certs.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("dev-certs.sh: %v\n%s", err, out)
	}
	c := startClusterWith(t, []string{"LEAPCOUNT_TLS_DIR=" + dir}, "../docker-compose.tls.yml")
	respTLS, httpsAddr := c.addr("node1", 6443), c.addr("node1", 8443)
	ca := filepath.Join(dir, "ca.pem")

	var out string
	err := wait.Until(30*time.Second, func() error {
		b, err := exec.Command("redis-cli", "--tls", "--cacert", ca, "-h", "127.0.0.1", "-p", portOf(respTLS),
			"SW.INCR", "tls-example", "60s").CombinedOutput()
		out = strings.TrimSpace(string(b))
		if err != nil || out != "1" {
			return fmt.Errorf("redis-cli --tls SW.INCR: %v %q", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Post("https://localhost:"+portOf(httpsAddr)+"/v1/incr", "application/json",
		strings.NewReader(`{"key":"tls-example","window":"60s"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(body), `"count":2`) {
		t.Fatalf("HTTPS incr: %s %s %s; want 200 over HTTP/2 with count 2", resp.Proto, resp.Status, body)
	}

	// Plaintext RESP to the TLS port: the node reads no command from it.
	conn, err := net.DialTimeout("tcp", respTLS, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	if b, _ := io.ReadAll(conn); strings.Contains(string(b), "PONG") {
		t.Fatalf("plaintext PING on the TLS port answered %q", b)
	}
}

// portOf is the port of a host:port.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
