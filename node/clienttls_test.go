package node_test

import (
	"bufio"
	"bytes"
	"context"
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

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// tlsNode is a node serving every front end over TLS, and the files it was given.
type tlsNode struct {
	n      *node.Node
	ca     *certtest.CA   // signs the node's certificate and, when mutual, the clients'
	server certtest.Files // what --client-tls-cert and --client-tls-key name
	client certtest.Files // a client certificate of ca
	dir    string         // where the files are
	pool   *x509.CertPool // ca, for Go clients
	tune   func(*node.Config)
}

// startTLSNode starts one node with --resp-tls, --http-tls and --grpc-tls beside the
// plaintext ports, and --client-tls-ca when mutual.
func startTLSNode(t *testing.T, mutual bool, tune func(*node.Config)) *tlsNode {
	t.Helper()
	tn := &tlsNode{dir: t.TempDir()}
	tn.ca = certtest.NewCA(t, tn.dir, "clients")
	tn.server = tn.ca.Issue(t, tn.dir, "server")
	tn.client = tn.ca.Issue(t, tn.dir, "client")
	tn.pool = tn.ca.Pool()
	rules := filepath.Join(tn.dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tn.n = nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.RESPTLSAddr, cfg.HTTPTLSAddr, cfg.GRPCTLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		cfg.GRPCAddr, cfg.Limits = "127.0.0.1:0", rules
		cfg.ClientTLSCertFile, cfg.ClientTLSKeyFile = tn.server.Cert, tn.server.Key
		if mutual {
			cfg.ClientTLSCAFile = tn.ca.File
		}
		if tune != nil {
			tune(cfg)
		}
	}).Nodes[0]
	return tn
}

// goTLS is a Go client's configuration: trusting roots, presenting cert if given.
func goTLS(t *testing.T, roots *x509.CertPool, cert *certtest.Files) *tls.Config {
	t.Helper()
	c := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		pair, err := tls.LoadX509KeyPair(cert.Cert, cert.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the node asks for (Certificates would send none that the
		// node's CA did not sign), so that the node is the one to refuse it.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return c
}

// tool is the path of a client program the test runs, or skips the test naming the
// package that has it.
func tool(t *testing.T, name, from string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", "bin", "gotools", name)); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p // make tools (scripts/ensure-go-tools.sh) puts it there
		}
	}
	t.Skipf("%s not installed (%s; make tools installs it)", name, from)
	return ""
}

// redisPy is a python3 that imports redis (Debian's python3-redis installs it for the
// system's python3, which may not be the first on PATH), or skips the test.
func redisPy(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with redis (Debian's python3-redis)")
	return ""
}

// run runs a client program and returns its output, stdout and stderr together.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func goRedis(t *testing.T, addr string, conf *tls.Config) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: conf, MaxRetries: -1, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

func incr(c *redis.Client, key string) (int64, error) {
	return c.Do(context.Background(), "SW.INCR", key, "1h").Int64()
}

func rlsOverTLS(t *testing.T, addr string, conf *tls.Config) rlspb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

func httpsClient(conf *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
}

// Every client port answers over TLS with real clients: go-redis, redis-cli --tls,
// curl --cacert, Go's HTTPS client, a go-control-plane gRPC client, and
// grpc-health-probe -tls. The counts show each reached the same counter.
func TestClientTLSServesEveryFrontEnd(t *testing.T) {
	tn := startTLSNode(t, false, nil)
	conf := goTLS(t, tn.pool, nil)
	if got, err := incr(goRedis(t, tn.n.RESPTLSAddr(), conf), "k"); err != nil || got != 1 {
		t.Fatalf("go-redis over TLS: %d, %v; want 1", got, err)
	}
	t.Run("redis-cli", func(t *testing.T) {
		cli := tool(t, "redis-cli", "Debian's redis-tools")
		host, port, _ := net.SplitHostPort(tn.n.RESPTLSAddr())
		out, err := run(t, cli, "-h", host, "-p", port, "--tls", "--cacert", tn.ca.File, "SW.INCR", "cli", "1h")
		if err != nil || out != "1" {
			t.Fatalf("redis-cli --tls: %q, %v; want 1", out, err)
		}
	})
	t.Run("curl", func(t *testing.T) {
		curl := tool(t, "curl", "Debian's curl")
		out, err := run(t, curl, "-sS", "--cacert", tn.ca.File, "-XPOST", "https://"+tn.n.HTTPTLSAddr()+"/v1/incr", "-d", `{"key":"k","window":"1h"}`)
		if err != nil || out != `{"key":"k","count":2}` {
			t.Fatalf("curl --cacert: %q, %v; want the count of k after go-redis's", out, err)
		}
	})
	t.Run("redis-py", func(t *testing.T) {
		py := redisPy(t)
		host, port, _ := net.SplitHostPort(tn.n.RESPTLSAddr())
		out, err := run(t, py, "-c", "import sys, redis; r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), ssl=True, ssl_ca_certs=sys.argv[3]); print(r.execute_command('SW.INCR', 'py', '1h'))",
			host, port, tn.ca.File)
		if err != nil || out != "1" {
			t.Fatalf("redis-py with ssl=True: %q, %v; want 1", out, err)
		}
	})
	resp, err := httpsClient(conf).Get("https://" + tn.n.HTTPTLSAddr() + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("GET /readyz over TLS: %v, %v", resp, err)
	}
	resp.Body.Close()
	rls := rlsOverTLS(t, tn.n.GRPCTLSAddr(), conf)
	for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
		r, err := rls.ShouldRateLimit(context.Background(), oneDescriptor("edge", "user", "alice"))
		if err != nil || r.OverallCode != want {
			t.Fatalf("ShouldRateLimit %d over TLS: %v, %v; want %v", i+1, r, err, want)
		}
	}
	t.Run("grpc-health-probe", func(t *testing.T) {
		probe := tool(t, "grpc-health-probe", "go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.41")
		// Health follows readiness, polled every 200 ms: it turns SERVING shortly after.
		wait.For(t, 10*time.Second, func() error {
			out, err := run(t, probe, "-addr", tn.n.GRPCTLSAddr(), "-tls", "-tls-ca-cert", tn.ca.File, "-service", rlspb.RateLimitService_ServiceDesc.ServiceName)
			if err != nil || !strings.Contains(out, "status: SERVING") {
				return fmt.Errorf("grpc-health-probe -tls: %q, %v; want SERVING", out, err)
			}
			return nil
		})
	})
}

// With --client-tls-ca, a client with a certificate of the CA is served on every port,
// and each refusal (no certificate, another CA's, an expired one, a client that does
// not trust the node's CA, plaintext to a TLS port) fails with an error that says why,
// and leaves the node serving.
func TestClientTLSMutualAndItsRefusals(t *testing.T) {
	tn := startTLSNode(t, true, nil)
	good := goTLS(t, tn.pool, &tn.client)
	if got, err := incr(goRedis(t, tn.n.RESPTLSAddr(), good), "m"); err != nil || got != 1 {
		t.Fatalf("go-redis with a client certificate: %d, %v; want 1", got, err)
	}
	other := certtest.NewCA(t, tn.dir, "other")
	stranger := other.Issue(t, tn.dir, "stranger")
	expired := tn.ca.IssueExpired(t, tn.dir, "expired")
	refusals := []struct {
		name string
		conf *tls.Config
		want string // in the client's error
		// in the error at TLS 1.2, which has no alert for a missing certificate
		want12 string
	}{
		{"no client certificate", goTLS(t, tn.pool, nil), "certificate required", "handshake failure"},
		{"another CA's certificate", goTLS(t, tn.pool, &stranger), "unknown certificate authority", "unknown certificate authority"},
		{"an expired certificate", goTLS(t, tn.pool, &expired), "expired certificate", "expired certificate"},
		{"a client that trusts another CA", goTLS(t, other.Pool(), &tn.client), "certificate signed by unknown authority", "certificate signed by unknown authority"},
	}
	for _, r := range refusals {
		if _, err := incr(goRedis(t, tn.n.RESPTLSAddr(), r.conf), "m"); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("RESP, %s: %v; want an error with %q", r.name, err, r.want)
		}
		if _, err := httpsClient(r.conf).Get("https://" + tn.n.HTTPTLSAddr() + "/readyz"); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("HTTP, %s: %v; want an error with %q", r.name, err, r.want)
		}
		// gRPC at TLS 1.2: at 1.3 the client's handshake is over before the node has
		// checked its certificate, and grpc-go reports whichever it meets first, the
		// node's alert or the closed connection ("broken pipe"); both are Unavailable.
		tls12 := r.conf.Clone()
		tls12.MaxVersion = tls.VersionTLS12
		if _, err := rlsOverTLS(t, tn.n.GRPCTLSAddr(), tls12).ShouldRateLimit(context.Background(), oneDescriptor("edge", "user", "x")); err == nil || !strings.Contains(err.Error(), r.want12) {
			t.Errorf("gRPC, %s: %v; want an error with %q", r.name, err, r.want12)
		}
	}
	t.Run("plaintext to a TLS port", func(t *testing.T) { plaintextRefused(t, tn) })
	t.Run("redis-cli", func(t *testing.T) { redisCLIMutual(t, tn) })
	t.Run("curl", func(t *testing.T) { curlMutual(t, tn) })

	// The node still serves, and counted the refused handshakes.
	if got, err := incr(goRedis(t, tn.n.RESPTLSAddr(), good), "m"); err != nil || got != 2 {
		t.Fatalf("go-redis after the refusals: %d, %v; want 2", got, err)
	}
	r, err := rlsOverTLS(t, tn.n.GRPCTLSAddr(), good).ShouldRateLimit(context.Background(), oneDescriptor("edge", "user", "y"))
	if err != nil || r.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("gRPC after the refusals: %v, %v", r, err)
	}
	if !tn.n.Ready() {
		t.Fatal("the node is not ready after the refusals")
	}
	if m := metricsOf(t, tn.n); !strings.Contains(m, `leapcount_resp_connections_dropped_total{reason="tls_handshake"}`) ||
		strings.Contains(m, `leapcount_resp_connections_dropped_total{reason="tls_handshake"} 0`) {
		t.Fatal("refused RESP handshakes not counted in leapcount_resp_connections_dropped_total{reason=\"tls_handshake\"}")
	}
}

// plaintextRefused speaks plaintext to each TLS port: RESP answers an error saying the
// port speaks TLS, HTTP answers 400 saying so (net/http's), gRPC fails the call.
func plaintextRefused(t *testing.T, tn *tlsNode) {
	c, err := net.DialTimeout("tcp", tn.n.RESPTLSAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "*3\r\n$7\r\nSW.INCR\r\n$1\r\nm\r\n$2\r\n1h\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "this port speaks TLS") {
		t.Errorf("plaintext RESP to --resp-tls: %q; want an error saying the port speaks TLS", line)
	}
	resp, err := http.Get("http://" + tn.n.HTTPTLSAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Errorf("plaintext HTTP to --http-tls: %d %q; want 400 naming HTTPS", resp.StatusCode, body)
	}
	conn, err := grpc.NewClient(tn.n.GRPCTLSAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, oneDescriptor("edge", "user", "z")); err == nil {
		t.Error("plaintext gRPC to --grpc-tls was answered")
	}
}

func redisCLIMutual(t *testing.T, tn *tlsNode) {
	cli := tool(t, "redis-cli", "Debian's redis-tools")
	host, port, _ := net.SplitHostPort(tn.n.RESPTLSAddr())
	base := []string{"-h", host, "-p", port, "--tls", "--cacert", tn.ca.File}
	out, err := run(t, cli, append(base, "--cert", tn.client.Cert, "--key", tn.client.Key, "SW.INCR", "cli-m", "1h")...)
	if err != nil || out != "1" {
		t.Fatalf("redis-cli --tls --cert: %q, %v; want 1", out, err)
	}
	out, _ = run(t, cli, append(base, "SW.INCR", "cli-m", "1h")...)
	if out == "1" || out == "2" || !strings.Contains(strings.ToLower(out), "error") {
		t.Fatalf("redis-cli --tls without --cert: %q; want an error", out)
	}
}

func curlMutual(t *testing.T, tn *tlsNode) {
	curl := tool(t, "curl", "Debian's curl")
	url := "https://" + tn.n.HTTPTLSAddr() + "/readyz"
	if out, err := run(t, curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", tn.ca.File, "--cert", tn.client.Cert, "--key", tn.client.Key, url); err != nil || out != "200" {
		t.Fatalf("curl --cert --key: %q, %v; want 200", out, err)
	}
	// With TLS 1.3 the client's handshake ends before the node checks its certificate:
	// curl may see the alert, or the connection the node closed after it (docs/security.md).
	out, err := run(t, curl, "-sS", "-o", "/dev/null", "--cacert", tn.ca.File, url)
	if err == nil || !strings.Contains(out, "alert") && !strings.Contains(out, "(55)") && !strings.Contains(out, "(56)") {
		t.Fatalf("curl without a client certificate: %q, %v; want a TLS alert, or the connection closed", out, err)
	}
}

// Replacing the certificate files while a client is connected: a new connection gets
// the new certificate (RESP, HTTP and gRPC share the files), and the connection open
// since before goes on being served, without a restart.
func TestClientTLSCertificateRotates(t *testing.T) {
	tn := startTLSNode(t, false, nil)
	conf := goTLS(t, tn.pool, nil)
	c := goRedis(t, tn.n.RESPTLSAddr(), conf)
	pinned := c.Conn()
	defer pinned.Close()
	if err := pinned.Do(context.Background(), "SW.INCR", "r", "1h").Err(); err != nil {
		t.Fatal(err)
	}
	served := func(addr string) []byte {
		tc, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			return nil
		}
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].Raw
	}
	old := served(tn.n.RESPTLSAddr())
	next := tn.ca.Issue(t, t.TempDir(), "server2")
	replaceFile(t, next.Cert, tn.server.Cert)
	replaceFile(t, next.Key, tn.server.Key)
	nextDER := pemDER(t, next.Cert)
	for _, addr := range []string{tn.n.RESPTLSAddr(), tn.n.HTTPTLSAddr(), tn.n.GRPCTLSAddr()} {
		wait.For(t, 10*time.Second, func() error {
			if got := served(addr); !bytes.Equal(got, nextDER) {
				return fmt.Errorf("%s still presents the old certificate (changed: %v)", addr, !bytes.Equal(got, old))
			}
			return nil
		})
	}
	if got, err := pinned.Do(context.Background(), "SW.INCR", "r", "1h").Int64(); err != nil || got != 2 {
		t.Fatalf("the connection open before the rotation: %d, %v; want 2", got, err)
	}
}

// replaceFile renames a copy of from over to, as cert-manager's tools do.
func replaceFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}

func pemDER(t *testing.T, file string) []byte {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(file, strings.TrimSuffix(file, ".pem")+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	return pair.Certificate[0]
}

// Plaintext ports off (--resp ” and --http ”), TLS only: the node serves over TLS
// and listens on no plaintext client port; and a Redis Cluster client over
// --resp-cluster-tls is told that port by CLUSTER SLOTS and follows it.
func TestClientTLSOnlyAndRedisClusterOverTLS(t *testing.T) {
	tn := startTLSNode(t, false, func(cfg *node.Config) {
		cfg.HTTPOff, cfg.RESPOff, cfg.GRPCAddr = true, true, ""
		cfg.RESPClusterTLSAddr = "127.0.0.1:0"
	})
	if tn.n.HTTPAddr() != "" || tn.n.RESPAddr() != "" || tn.n.GRPCAddr() != "" {
		t.Fatalf("plaintext ports listen: http %q resp %q grpc %q", tn.n.HTTPAddr(), tn.n.RESPAddr(), tn.n.GRPCAddr())
	}
	conf := goTLS(t, tn.pool, nil)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tn.n.RESPClusterAddr()}, TLSConfig: conf, MaxRetries: -1})
	defer cc.Close()
	for i := 1; i <= 3; i++ {
		got, err := cc.Do(context.Background(), "SW.INCR", fmt.Sprintf("c%d", i), "1h").Int64()
		if err != nil || got != 1 {
			t.Fatalf("Redis Cluster client over TLS, key %d: %d, %v", i, got, err)
		}
	}
	slots, err := cc.ClusterSlots(context.Background()).Result()
	if err != nil || len(slots) == 0 || slots[0].Nodes[0].Addr != tn.n.RESPClusterAddr() {
		t.Fatalf("CLUSTER SLOTS: %v, %v; want this node at --resp-cluster-tls %s", slots, err, tn.n.RESPClusterAddr())
	}
}
