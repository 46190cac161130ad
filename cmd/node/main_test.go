package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/peerauth"
)

func TestBadFlagsNameTheFlag(t *testing.T) {
	tokenFile := writeFile(t, "token", "s3cret\n")
	emptyFile := writeFile(t, "empty", "\n")
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--http", "nonsense"}, nil, "--http"},
		{[]string{"--resp", "127.0.0.1"}, nil, "--resp"},
		{[]string{"--join", "a:1,b"}, nil, "--join"},
		{[]string{"--join", "peers.example:gossip"}, nil, "--join"},
		{[]string{"--join", ":7946"}, nil, "--join"},
		{nil, map[string]string{"LEAPCOUNT_JOIN": "peers.example:0"}, "--join"},
		{[]string{"--redis", "http://x"}, nil, "--redis"},
		{[]string{"--max-key-bytes", "0"}, nil, "--max-key-bytes"},
		{[]string{"--max-counters", "-1"}, nil, "--max-counters"},
		{[]string{"--max-shapes", "0"}, nil, "--max-shapes"},
		{nil, map[string]string{"LEAPCOUNT_MAX_SHAPES": "70000"}, "--max-shapes"},
		{[]string{"--sweep-interval", "soon"}, nil, "sweep-interval"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
		{[]string{"--name", ""}, nil, "--name"},
		{[]string{"--lease", "-1s"}, nil, "--lease"},
		{[]string{"--gossip-probe-timeout", "2s"}, nil, "--gossip-probe-timeout"},
		{[]string{"--gossip-suspicion-mult", "-1"}, nil, "--gossip-suspicion-mult"},
		{nil, map[string]string{"LEAPCOUNT_MAX_BODY_BYTES": "ten"}, "LEAPCOUNT_MAX_BODY_BYTES"},
		{nil, map[string]string{"LEAPCOUNT_GOSSIP": "nope"}, "--gossip"},
		{[]string{"stray"}, nil, "unexpected argument"},
		{[]string{"--gossip-key", "not base64!"}, nil, "--gossip-key"},
		{[]string{"--gossip-key", "c2hvcnQ="}, nil, "--gossip-key"},
		{[]string{"--gossip-key-file", "/nonexistent/key"}, nil, "--gossip-key-file"},
		{[]string{"--gossip-key-file", "/dev/null"}, nil, "--gossip-key-file"},
		{[]string{"--tls-cert", "/etc/hostname"}, nil, "--tls-key"},
		{[]string{"--tls-cert", "/nonexistent", "--tls-key", "/nonexistent", "--tls-ca", "/nonexistent"}, nil, "--tls-cert"},
		{[]string{"--cluster-name", strings.Repeat("c", 256)}, nil, "--cluster-name"},
		{[]string{"--resp-cluster", "7380"}, nil, "--resp-cluster"},
		{[]string{"--resp-cluster-advertise", "host-without-port"}, nil, "--resp-cluster-advertise"},
		{[]string{"--token", "a", "--token-file", tokenFile}, nil, "--token or --token-file"},
		{[]string{"--token-file", filepath.Join(t.TempDir(), "missing")}, nil, "--token-file"},
		{[]string{"--token-file", emptyFile}, nil, "--token-file"},
		{nil, map[string]string{"LEAPCOUNT_TOKEN_FILE": emptyFile}, "--token-file"},
		{[]string{"--max-clients", "0"}, nil, "--max-clients"},
		{[]string{"--resp-idle-timeout", "-1s"}, nil, "--resp-idle-timeout"},
		{[]string{"--test-clock-offset", "25h"}, nil, "--test-clock-offset"},
		{[]string{"--redis-wait-replicas", "-1", "--redis", "redis://127.0.0.1:1/0"}, nil, "--redis-wait-replicas"},
		{[]string{"--redis-wait-replicas", "1"}, nil, "--redis-wait-replicas"},
		{[]string{"--redis-wait-timeout", "-1s"}, nil, "--redis-wait-timeout"},
		{[]string{"--redis-wait-replicas", "1", "--redis", "redis://127.0.0.1:1/0", "--redis-wait-timeout", "1s"}, nil, "--redis-wait-timeout"},
		{[]string{"--resp-tls", "127.0.0.1:0"}, nil, "--resp-tls: needs --client-tls-cert"},
		{nil, map[string]string{"LEAPCOUNT_GRPC_TLS": "127.0.0.1:0"}, "--grpc-tls: needs --client-tls-cert"},
		{[]string{"--http-tls", "8443", "--client-tls-cert", "c", "--client-tls-key", "k"}, nil, "--http-tls"},
		{[]string{"--client-tls-cert", "c", "--client-tls-key", "k"}, nil, "--client-tls-cert: no TLS listener uses it"},
		{[]string{"--http-tls", "127.0.0.1:0", "--client-tls-cert", "c"}, nil, "--http-tls: needs --client-tls-cert and --client-tls-key"},
		{[]string{"--client-tls-ca", "ca"}, nil, "--client-tls-ca"},
		{[]string{"--resp-cluster", "127.0.0.1:0", "--resp-cluster-tls", "127.0.0.1:0", "--client-tls-cert", "c", "--client-tls-key", "k"}, nil, "not both"},
		{[]string{"--resp-tls", "127.0.0.1:0", "--client-tls-cert", "/nonexistent", "--client-tls-key", "/nonexistent"}, nil, "--client-tls-cert: open /nonexistent"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		env := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		if code := run(c.args, env, &out); code != 2 {
			t.Errorf("%v %v: exit %d; want 2 (output %q)", c.args, c.env, code, out.String())
			continue
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%v %v: message %q does not name %q", c.args, c.env, out.String(), c.want)
		}
	}
}

func TestFlagBeatsEnvironment(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"LEAPCOUNT_NAME": "from-env", "LEAPCOUNT_HTTP": "127.0.0.1:1234"}[k]
		return v, ok
	}
	cfg, _, err := parseFlags([]string{"--name", "from-flag"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "from-flag" || cfg.HTTPAddr != "127.0.0.1:1234" {
		t.Fatalf("got name %q http %q; want from-flag, 127.0.0.1:1234", cfg.Name, cfg.HTTPAddr)
	}
}

// An empty --http or --resp, on the command line or in the environment, switches that
// plaintext port off; the TLS ports read LEAPCOUNT_<NAME> as every flag does.
func TestEmptyPlaintextPortIsOff(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"LEAPCOUNT_RESP": "", "LEAPCOUNT_RESP_TLS": "127.0.0.1:6443",
			"LEAPCOUNT_CLIENT_TLS_CERT": "c.pem", "LEAPCOUNT_CLIENT_TLS_KEY": "k.pem"}[k]
		return v, ok
	}
	cfg, _, err := parseFlags([]string{"--http="}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.HTTPOff || !cfg.RESPOff || cfg.RESPTLSAddr != "127.0.0.1:6443" || cfg.ClientTLSCertFile != "c.pem" {
		t.Fatalf("got http off %v, resp off %v, resp-tls %q, cert %q; want both off and the TLS port from the environment",
			cfg.HTTPOff, cfg.RESPOff, cfg.RESPTLSAddr, cfg.ClientTLSCertFile)
	}
	if cfg, _, _ := parseFlags(nil, noEnv, io.Discard); cfg.HTTPOff || cfg.RESPOff {
		t.Fatal("the defaults switch a plaintext port off")
	}
}

// --test-clock-offset comes from the flag or LEAPCOUNT_TEST_CLOCK_OFFSET, and -h says it
// is for tests only.
func TestTestClockOffsetFlag(t *testing.T) {
	env := func(k string) (string, bool) { return "-2s", k == "LEAPCOUNT_TEST_CLOCK_OFFSET" }
	for _, c := range []struct {
		args []string
		env  func(string) (string, bool)
		want time.Duration
	}{{nil, noEnv, 0}, {[]string{"--test-clock-offset=250ms"}, noEnv, 250 * time.Millisecond}, {nil, env, -2 * time.Second}} {
		cfg, _, err := parseFlags(c.args, c.env, io.Discard)
		if err != nil || cfg.TestClockOffset != c.want {
			t.Errorf("%v: offset %v, %v; want %v", c.args, cfg.TestClockOffset, err, c.want)
		}
	}
	var help bytes.Buffer
	if _, _, err := parseFlags([]string{"-h"}, noEnv, &help); err == nil || !strings.Contains(help.String(), "-test-clock-offset duration\n    \tTEST ONLY") {
		t.Errorf("-h: %v; want its text to mark --test-clock-offset TEST ONLY:\n%s", err, help.String())
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestBinaryServesAndStopsOnSIGTERM starts the node as a process on free ports,
// uses it, and checks that SIGTERM ends it with exit code 0.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := nodeBinary(t)
	p := startBinary(t, bin, "--name", "t1")
	if r, err := http.Get("http://" + p.http + "/readyz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("/readyz right after \"node serving\": %v %v; want 200 (a node with no one to join is ready at once)", r, err)
	}
	resp, err := http.Post("http://"+p.http+"/v1/incr", "application/json", strings.NewReader(`{"key":"a","window":"1m","n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"key":"a","count":3}`; resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("incr: got %d %s; want 200 %s", resp.StatusCode, body, want)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(p.cmd, 20*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}

// The token can come from a file, so that it is not on the command line.
func TestTokenFile(t *testing.T) {
	file := writeFile(t, "token", "s3cret\r\n")
	cfg, _, err := parseFlags([]string{"--token-file", file}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil || cfg.TokenFile != file {
		t.Fatalf("--token-file: got %q, %v; want %q", cfg.TokenFile, err, file)
	}
	p := startBinary(t, nodeBinary(t), "--name", "t1", "--token-file", file)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
	if err != nil || bytes.Contains(cmdline, []byte("s3cret")) {
		t.Fatalf("the command line %q (%v) shows the token", cmdline, err)
	}
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer s3cret", 200}} { // the file's CRLF is not part of the token
		req, _ := http.NewRequest("POST", "http://"+p.http+"/v1/incr", strings.NewReader(`{"key":"a","window":"1m"}`))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("Authorization %q: got %d; want %d", c.auth, resp.StatusCode, c.want)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(p.cmd, 20*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type proc struct {
	cmd                *exec.Cmd
	http, resp, gossip string
	log                *stderrLines
}

// stderrLines are the lines a node binary wrote to stderr so far.
type stderrLines struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{} // closed once stderr is closed (the process ended)
}

func (l *stderrLines) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// snapshot returns the lines so far.
func (l *stderrLines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// all waits for the process's stderr to close, then returns every line.
func (l *stderrLines) all(t *testing.T) []string {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(20 * time.Second):
		t.Fatal("stderr still open 20s after the process was told to stop")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// asNodeEnv, set to 1 in a process started from this test binary, makes it run the
// node's main instead of the tests.
const asNodeEnv = "LEAPCOUNT_CMD_NODE_TEST_AS_NODE"

// TestMain runs main when the tests start their own binary as a node (nodeBinary);
// otherwise it runs the tests, with proctest's clean-up of stale firewall rules.
func TestMain(m *testing.M) {
	if os.Getenv(asNodeEnv) == "1" {
		main() // it exits
	}
	os.Setenv(asNodeEnv, "1") // for every process the tests start from nodeBinary's path
	os.Exit(proctest.Main(m))
}

// nodeBinary is the path of the node the tests run: this test binary, which holds
// main, compiled as the tests are (under the race detector in make test). A separate go
// build of the command (as chaos_test's proctest.Binary does) compiled every dependency
// once more, without -race, in a cold make test.
func nodeBinary(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startBinary starts the node on port 0 everywhere and reads the bound addresses from
// its JSON log.
func startBinary(t *testing.T, bin string, args ...string) proc {
	t.Helper()
	args = append([]string{"--http", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--gossip", "127.0.0.1:0",
		"--rpc", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	stderr := startKilledAtEnd(t, cmd)
	found := make(chan proc, 1)
	lines := &stderrLines{done: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() { // what the node logged explains most failures
			name := "node"
			if i := slices.Index(args, "--name"); i >= 0 && i+1 < len(args) {
				name = args[i+1]
			}
			for _, l := range lines.snapshot() {
				t.Logf("%s: %s", name, l)
			}
		}
	})
	go func() {
		defer close(lines.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines.add(sc.Text())
			var line struct{ Msg, HTTP, RESP, Gossip string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "node serving" {
				found <- proc{cmd: cmd, http: line.HTTP, resp: line.RESP, gossip: line.Gossip, log: lines}
			}
		}
	}()
	select {
	case p := <-found:
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not log \"node serving\" within 30s")
	}
	return proc{}
}

func waitExit(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("exit: %v; want exit 0", err)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("still running after %v", d)
	}
}

// The healthcheck subcommand (the container health check of a FROM scratch image) exits
// 0 for a ready node, also given a wildcard address as inside a container, and 1 when
// nothing answers.
func TestHealthcheckSubcommand(t *testing.T) {
	p := startBinary(t, nodeBinary(t), "--name", "t1")
	_, port, _ := net.SplitHostPort(p.http)
	for _, addr := range []string{p.http, "0.0.0.0:" + port} {
		var out bytes.Buffer
		if code := healthcheck([]string{"--http", addr}, noEnv, &out); code != 0 {
			t.Fatalf("healthcheck --http %s: exit %d (%s); want 0", addr, code, out.String())
		}
	}
	env := func(k string) (string, bool) { return p.http, k == "LEAPCOUNT_HTTP" }
	if code := healthcheck(nil, env, io.Discard); code != 0 {
		t.Fatalf("healthcheck with LEAPCOUNT_HTTP: exit %d; want 0", code)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	var out bytes.Buffer
	if code := healthcheck([]string{"--http", free, "--timeout", "1s"}, noEnv, &out); code != 1 || !strings.Contains(out.String(), "not ready") {
		t.Fatalf("healthcheck of nothing: exit %d (%s); want 1, not ready", code, out.String())
	}
}

// --join takes DNS names beside addresses: checked for the host:port shape only, since
// the name's records may not exist yet when the node starts (a StatefulSet's first pod).
func TestJoinTakesDNSNames(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	cfg, _, err := parseFlags([]string{"--join", "lc-headless.ns.svc.cluster.local.:7946, 10.0.0.7:7946"}, noEnv, io.Discard)
	if err != nil || len(cfg.Join) != 2 || cfg.Join[0] != "lc-headless.ns.svc.cluster.local.:7946" || cfg.Join[1] != "10.0.0.7:7946" {
		t.Fatalf("got %q, %v; want the name and the address", cfg.Join, err)
	}
}

// `version` and `--version` print the built binary's version line, with the Go that
// built it and the cluster protocol version, and exit 0 without starting a node.
func TestVersionSubcommand(t *testing.T) {
	bin := nodeBinary(t)
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		line := strings.TrimSpace(string(out))
		protocol := fmt.Sprintf(" cluster-protocol %d", peerauth.ProtocolVersion)
		if !strings.HasPrefix(line, "leapcount ") || !strings.Contains(line, runtime.Version()) || !strings.HasSuffix(line, protocol) || strings.Count(line, "\n") != 0 {
			t.Fatalf("%s printed %q; want one line naming leapcount's version, %s and%s", arg, line, runtime.Version(), protocol)
		}
	}
}

// A node writes one structured stream (every line JSON with --log-format json), logs
// one line for each change of a member's state (b: alive, leaving, left), and a
// graceful stop logs no ERROR, on the node that stops or on the one that stays.
func TestLogsAreOneStreamAndQuietOnAGracefulStop(t *testing.T) {
	bin := nodeBinary(t)
	a := startBinary(t, bin, "--name", "a")
	b := startBinary(t, bin, "--name", "b", "--join", a.gossip)
	wait.For(t, 30*time.Second, func() error {
		for _, l := range a.log.snapshot() {
			if strings.Contains(l, `"msg":"member alive"`) && strings.Contains(l, `"member":"b"`) {
				return nil
			}
		}
		return errors.New(`a has not logged "member alive" for b`)
	})
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(b.cmd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, func() error {
		for _, l := range a.log.snapshot() {
			if strings.Contains(l, `"msg":"member left"`) && strings.Contains(l, `"member":"b"`) {
				return nil
			}
		}
		return errors.New(`a has not logged "member left" for b`)
	})
	a.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(a.cmd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]proc{"a": a, "b": b} {
		var ofB []string
		for _, l := range p.log.all(t) {
			var rec struct{ Level, Msg, Member string }
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Errorf("%s wrote a line that is not JSON: %q", name, l)
				continue
			}
			if rec.Level == "ERROR" {
				t.Errorf("%s logged an ERROR on a graceful stop: %s", name, l)
			}
			if strings.HasPrefix(rec.Msg, "member ") && rec.Member == "b" {
				ofB = append(ofB, rec.Msg)
			}
		}
		if got := strings.Join(ofB, ", "); name == "a" && got != "member alive, member leaving, member left" {
			t.Errorf("a logged %q of b; want one line per change: alive, leaving, left", got)
		}
	}
}

// startKilledAtEnd starts cmd, killed when the test ends, and returns its stderr.
func startKilledAtEnd(t *testing.T, cmd *exec.Cmd) io.ReadCloser {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return stderr
}
