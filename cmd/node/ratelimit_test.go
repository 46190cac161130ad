package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// rlProc is a `leapcount-node ratelimit` process and the addresses it logged.
type rlProc struct {
	cmd                                     *exec.Cmd
	http, grpc, grpcTLS, debug, rpc, gossip string
	log                                     *stderrLines
}

// startRatelimit runs `leapcount-node ratelimit` with env added to the test's
// environment and waits for it to serve, reading its addresses from its JSON log.
func startRatelimit(t *testing.T, env ...string) rlProc {
	t.Helper()
	return startRatelimitCmd(t, exec.Command(nodeBinary(t), "ratelimit"), env...)
}

// startRatelimitCmd is startRatelimit with cmd (not started) as the process.
func startRatelimitCmd(t *testing.T, cmd *exec.Cmd, env ...string) rlProc {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stderr := startKilledAtEnd(t, cmd)
	p := rlProc{cmd: cmd, log: &stderrLines{done: make(chan struct{})}}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range p.log.snapshot() {
				t.Logf("ratelimit: %s", l)
			}
		}
	})
	served := make(chan rlProc, 1)
	// The reader keeps its own copy of the log's pointer: p is assigned below, as the
	// process serves, while the reader reads on (the race detector caught it reading p).
	log := p.log
	go func() {
		defer close(log.done)
		sc := bufio.NewScanner(stderr)
		q := p
		for sc.Scan() {
			log.add(sc.Text())
			var line struct {
				Msg, HTTP, GRPC, Listener, Addr, RPC, Gossip string
				GRPCTLS                                      string `json:"grpc_tls"`
			}
			json.Unmarshal(sc.Bytes(), &line)
			switch {
			case line.Msg == "node serving":
				q.http, q.grpc, q.grpcTLS, q.rpc, q.gossip = line.HTTP, line.GRPC, line.GRPCTLS, line.RPC, line.Gossip
			case line.Msg == "ratelimit listener serving" && line.Listener == "debug":
				q.debug = line.Addr
				served <- q
			}
		}
	}()
	select {
	case p = <-served:
		return p
	case <-p.log.done:
		t.Fatalf("leapcount-node ratelimit ended before it served (%v)", p.cmd.Wait())
	case <-time.After(30 * time.Second):
		t.Fatal(`leapcount-node ratelimit did not log its debug listener within 30s`)
	}
	return p
}

// runtimeRoot lays out RUNTIME_ROOT as envoyproxy/ratelimit reads it:
// <root>/<subdirectory>/config/*.yaml.
func runtimeRoot(t *testing.T, sub string, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, sub, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const rlTestConfig = `domain: edge
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 2
`

// `leapcount-node ratelimit`, started from envoyproxy/ratelimit's variables and its
// runtime layout, answers ShouldRateLimit over gRPC with fixed, epoch-aligned windows
// (as envoyproxy/ratelimit: OK, OK, OVER_LIMIT, reset at the hour's end), and serves
// its /healthcheck, /json and debug listener; SIGTERM stops it with exit 0.
func TestRatelimitSubcommandServesAsEnvoyRatelimit(t *testing.T) {
	root := runtimeRoot(t, "ratelimit", map[string]string{"edge.yaml": rlTestConfig})
	p := startRatelimit(t, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_STATSD=false", "LOG_LEVEL=info", "LOG_FORMAT=json",
		"LEAPCOUNT_NAME=rl1", "LEAPCOUNT_RESP=127.0.0.1:0", "LEAPCOUNT_GOSSIP=127.0.0.1:0", "LEAPCOUNT_RPC=127.0.0.1:0")
	wait.For(t, 10*time.Second, func() error {
		code, body := httpGet(t, "http://"+p.http+"/healthcheck")
		if code != 200 || body != "OK" {
			return fmt.Errorf("/healthcheck: %d %q; want 200 \"OK\"", code, body)
		}
		return nil
	})
	checkGRPCFixedWindow(t, p.grpc)
	checkJSONEndpoint(t, "http://"+p.http+"/json")
	if code, body := httpGet(t, "http://"+p.debug+"/"); code != 200 || !strings.Contains(body, "/debug/pprof/") || !strings.Contains(body, "/stats") {
		t.Errorf("debug listener /: %d %q; want 200 listing /debug/pprof/ and /stats", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(p.cmd, 20*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}

// envoyproxy/ratelimit's gRPC TLS settings (GRPC_SERVER_USE_TLS with its certificate,
// key and client CA) serve ShouldRateLimit over mutual TLS only: a client with a
// certificate of that CA is answered, and no plaintext gRPC port is open.
func TestRatelimitSubcommandServesGRPCOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	srv, cli := ca.Issue(t, dir, "127.0.0.1"), ca.Issue(t, dir, "envoy")
	root := runtimeRoot(t, "ratelimit", map[string]string{"edge.yaml": rlTestConfig})
	p := startRatelimit(t, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT="+srv.Cert, "GRPC_SERVER_TLS_KEY="+srv.Key, "GRPC_CLIENT_TLS_CACERT="+srv.CA,
		"USE_STATSD=false", "LOG_LEVEL=info", "LOG_FORMAT=json",
		"LEAPCOUNT_NAME=rl1", "LEAPCOUNT_RESP=127.0.0.1:0", "LEAPCOUNT_GOSSIP=127.0.0.1:0", "LEAPCOUNT_RPC=127.0.0.1:0")
	if p.grpc != "" || p.grpcTLS == "" {
		t.Fatalf("gRPC plaintext %q, TLS %q; want TLS alone", p.grpc, p.grpcTLS)
	}
	pair, err := tls.LoadX509KeyPair(cli.Cert, cli.Key)
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1"})
	checkGRPCFixedWindowWith(t, p.grpcTLS, grpc.WithTransportCredentials(creds))
}

// checkGRPCFixedWindow calls ShouldRateLimit three times for one descriptor within one
// hour window (again with another value if an hour boundary fell between).
func checkGRPCFixedWindow(t *testing.T, addr string) {
	t.Helper()
	checkGRPCFixedWindowWith(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// checkGRPCFixedWindowWith is checkGRPCFixedWindow over the connection opt makes.
func checkGRPCFixedWindowWith(t *testing.T, addr string, opt grpc.DialOption) {
	t.Helper()
	conn, err := grpc.NewClient(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := rlspb.NewRateLimitServiceClient(conn)
	for attempt := 0; attempt < 3; attempt++ {
		hour := time.Now().Unix() / 3600
		got := make([]*rlspb.RateLimitResponse, 3)
		for i := range got {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			got[i], err = cl.ShouldRateLimit(ctx, userRequest(fmt.Sprintf("alice%d", attempt)))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		end := time.Now()
		if end.Unix()/3600 != hour {
			continue // an hour boundary fell between the calls
		}
		checkFixedWindowAnswers(t, got, 3600-end.Unix()%3600)
		return
	}
	t.Fatal("three attempts each crossed an hour boundary")
}

// checkFixedWindowAnswers checks OK (1 left), OK (0 left), OVER_LIMIT, each reset at
// the hour's end (resetS seconds away, within a second).
func checkFixedWindowAnswers(t *testing.T, got []*rlspb.RateLimitResponse, resetS int64) {
	t.Helper()
	want := []struct {
		code      rlspb.RateLimitResponse_Code
		remaining uint32
	}{{rlspb.RateLimitResponse_OK, 1}, {rlspb.RateLimitResponse_OK, 0}, {rlspb.RateLimitResponse_OVER_LIMIT, 0}}
	for i, w := range want {
		st := got[i].GetStatuses()[0]
		reset := st.GetDurationUntilReset().GetSeconds()
		if got[i].OverallCode != w.code || st.LimitRemaining != w.remaining || reset < resetS-1 || reset > resetS+1 {
			t.Errorf("call %d: %v, remaining %d, reset in %ds; want %v, %d, %ds (a fixed window to the hour's end)",
				i+1, got[i].OverallCode, st.LimitRemaining, reset, w.code, w.remaining, resetS)
		}
	}
}

// checkJSONEndpoint posts requests to /json in protobuf's JSON form, as
// envoyproxy/ratelimit's clients do: 200 and the answer within the limit, 429 over it,
// 400 for a body that is no request.
func checkJSONEndpoint(t *testing.T, url string) {
	t.Helper()
	body, err := protojson.Marshal(userRequest("bob"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		status int
		code   rlspb.RateLimitResponse_Code
	}{{200, rlspb.RateLimitResponse_OK}, {200, rlspb.RateLimitResponse_OK}, {429, rlspb.RateLimitResponse_OVER_LIMIT}} {
		status, ctype, out := httpPost(t, url, string(body))
		var resp rlspb.RateLimitResponse
		if err := protojson.Unmarshal([]byte(out), &resp); err != nil || status != want.status || ctype != "application/json" || resp.OverallCode != want.code {
			t.Errorf("/json call %d: %d %s %q (%v); want %d application/json with overallCode %v", i+1, status, ctype, out, err, want.status, want.code)
		}
	}
	if status, _, _ := httpPost(t, url, `{"domain": 7}`); status != 400 {
		t.Errorf("/json with a body that is no request: %d; want 400", status)
	}
}

func userRequest(value string) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{
		{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "user", Value: value}}}}}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func httpPost(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// A setting leapcount does not honour stops the start: exit 2, one line naming it.
func TestRatelimitSubcommandRefusesMemcache(t *testing.T) {
	cmd := exec.Command(nodeBinary(t), "ratelimit")
	cmd.Env = append(os.Environ(), "BACKEND_TYPE=memcache", "MEMCACHE_HOST_PORT=memcached:11211",
		"PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0", "LEAPCOUNT_RESP=127.0.0.1:0", "LEAPCOUNT_GOSSIP=127.0.0.1:0", "LEAPCOUNT_RPC=127.0.0.1:0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	want := "leapcount-node ratelimit: BACKEND_TYPE=memcache: leapcount keeps counters itself; only BACKEND_TYPE=redis (or unset) is accepted\n"
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || stderr.String() != want {
		t.Fatalf("got %v, stderr %q; want exit 2 and %q", err, stderr.String(), want)
	}
}
