package main

import (
	"bufio"
	"bytes"
	"encoding/json"
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
)

func TestBadFlagsNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--http", "nonsense"}, nil, "--http"},
		{[]string{"--resp", "127.0.0.1"}, nil, "--resp"},
		{[]string{"--join", "a:1,b"}, nil, "--join"},
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

// TestBinaryServesAndStopsOnSIGTERM builds the real binary, starts it on free ports,
// uses it, and checks that SIGTERM ends it with exit code 0.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
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

type proc struct {
	cmd        *exec.Cmd
	http, resp string
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leapcount-node")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan proc, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, HTTP, RESP string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "node serving" {
				found <- proc{cmd: cmd, http: line.HTTP, resp: line.RESP}
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
