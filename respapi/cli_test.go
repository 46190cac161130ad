package respapi

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// redisCLI runs redis-cli against the server with args and returns what it printed.
func redisCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (make installs it)")
	}
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimRight(string(out), "\n")
}

func TestRedisCLI(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SW.INCR", "cli", "10s"}, "1"},
		{[]string{"sw.incr", "cli", "10s", "by", "4"}, "5"},
		{[]string{"SW.COUNT", "cli", "10s"}, "5"},
		{[]string{"SW.ALLOW", "cli", "10s", "6"}, "1\n6\n0\n0"},
		{[]string{"SW.ALLOW", "cli", "10s", "6"}, "0\n6\n0\n10000"},
		{[]string{"SW.RESET", "cli", "10s"}, "1"},
		{[]string{"SW.INCR", "cli", "forever"}, `ERR invalid window "forever": want a duration like 60s or 500ms, or whole milliseconds`},
		{[]string{"NOSUCH"}, "ERR unknown command 'NOSUCH', with args beginning with: "},
	} {
		if got := redisCLI(t, ts.addr, tc.args...); got != tc.want {
			t.Fatalf("redis-cli %v: got %q; want %q", tc.args, got, tc.want)
		}
	}
	if got := redisCLI(t, ts.addr, "INFO", "server"); !strings.Contains(got, "redis_version:7.0.0") {
		t.Fatalf("redis-cli INFO: got %q; want redis_version:7.0.0", got)
	}
}

func TestRedisCLIWithToken(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Token = "s3cret" })
	if got := redisCLI(t, ts.addr, "SW.INCR", "cli", "10s"); got != "NOAUTH Authentication required." {
		t.Fatalf("without -a: got %q; want NOAUTH", got)
	}
	if got := redisCLI(t, ts.addr, "-a", "s3cret", "--no-auth-warning", "SW.INCR", "cli", "10s"); got != "1" {
		t.Fatalf("with -a: got %q; want 1", got)
	}
}

func TestRedisCLIPipe(t *testing.T) {
	// redis-cli --pipe streams commands as fast as it can and counts the replies.
	ts := startServer(t, nil)
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (make installs it)")
	}
	host, port, _ := net.SplitHostPort(ts.addr)
	cmd := exec.Command(path, "-h", host, "-p", port, "--pipe")
	cmd.Stdin = strings.NewReader(strings.Repeat(encode("SW.INCR", "piped", "1m"), 1000))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "errors: 0, replies: 1000") {
		t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
	}
	wantReply(t, ts.dial(t).do("SW.COUNT", "piped", "1m"), ":1000")
}
