package proctest

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/longtest"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The tests that start nodes run in make test-long, beside chaos_test, which uses this
// harness: under make test, Binary's build of the node would compile every dependency
// once more, without -race, for them alone.
func TestHasFlag(t *testing.T) {
	longtest.Skip(t)
	if !HasFlag(t, "redis") {
		t.Errorf("HasFlag(redis) = false; want true")
	}
	if HasFlag(t, "no-such-flag") {
		t.Errorf("HasFlag(no-such-flag) = true; want false")
	}
}

// The harness's own life cycle: start two nodes, stop one gracefully, restart it on
// the same ports, freeze and thaw it, crash it and restart it again.
func TestLifeCycle(t *testing.T) {
	longtest.Skip(t)
	c := StartCluster(t, 2, Options{})
	n1 := c.Node(1)
	for _, n := range c.Nodes() {
		v, err := n.View()
		if err != nil {
			t.Fatal(err)
		}
		if v.Self != n.Name() || len(v.Alive()) != 2 || v.Shares() != v.Partitions {
			t.Fatalf("%s: view %+v; want self %s, 2 alive owning all partitions", n.Name(), v, n.Name())
		}
	}
	before := n1.Addrs()
	n1.Stop()
	if n1.Running() {
		t.Fatal("node-1 runs after Stop")
	}
	c.WaitConverged()
	if got := len(c.Live()); got != 1 {
		t.Fatalf("live nodes after Stop: got %d; want 1", got)
	}

	n1.Restart()
	if got := n1.Addrs(); got != before {
		t.Logf("node-1 restarted on other ports: %+v (was %+v)", got, before)
	}
	c.WaitConverged()

	n1.Pause()
	short := &http.Client{Timeout: 200 * time.Millisecond}
	if resp, err := short.Get("http://" + n1.HTTP() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("GET /healthz of a paused node answered %d; want a timeout", resp.StatusCode)
	}
	if got := len(c.Live()); got != 1 {
		t.Fatalf("live nodes while paused: got %d; want 1", got)
	}
	n1.Resume()
	c.WaitConverged()

	pid := n1.Pid()
	n1.Kill()
	if n1.Running() {
		t.Fatalf("node-1 (pid %d) runs after Kill", pid)
	}
	n1.Restart()
	if n1.Pid() == pid {
		t.Fatalf("Restart kept pid %d; want a new process", pid)
	}
	c.WaitConverged()
}

// LogLines finds a key's lines, the last max of them, named by their node.
func TestLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.log")
	log := "{\"key\":\"a\",\"i\":1}\n{\"key\":\"b\"}\n{\"key\":\"a\",\"i\":2}\n{\"key\":\"a\",\"i\":3}\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &Node{name: "node-7", logPath: path}
	got := n.LogLines(`"key":"a"`, 2)
	want := []string{`node-7: {"key":"a","i":2}`, `node-7: {"key":"a","i":3}`}
	if !slices.Equal(got, want) {
		t.Fatalf("LogLines = %q; want %q", got, want)
	}
}
