// Package clustertest starts in-process gossip clusters on 127.0.0.1 for tests, with
// timings fast enough that joins converge in well under a second, and polls them for
// conditions (membership converged, a member in a given state) with deadlines.
package clustertest

import (
	"fmt"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Timeout is a generous deadline for joins to converge on a loaded machine.
const Timeout = 10 * time.Second

// Config returns a Config for a member on 127.0.0.1 with a free gossip port, fast
// timings, a fast re-join and a placeholder RPC address made from the name (set
// RPCAddr to a real listener's address when the test needs one).
func Config(t testing.TB, name string, join ...string) cluster.Config {
	t.Helper()
	return cluster.Config{
		Name:           name,
		BindAddr:       "127.0.0.1:0",
		RPCAddr:        name + ".rpc.test:7947",
		Join:           join,
		RejoinInterval: 200 * time.Millisecond,
		JoinRetry:      cluster.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		Timings:        cluster.FastTimings(),
		Logger:         Logger(),
	}
}

// Logger discards logs, unless LEAPCOUNT_TEST_LOG is set, then it writes them to
// stderr at debug level. (Not to t.Log: memberlist goroutines may still log after
// a test ends, and logging to a finished test panics.)
func Logger() *slog.Logger {
	if os.Getenv("LEAPCOUNT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Start starts a member and shuts it down when the test ends.
func Start(t testing.TB, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

// MakeCluster starts n members named node-0 … node-(n-1), all joining node-0, and
// waits until every one sees all n alive.
func MakeCluster(t testing.TB, n int) []*cluster.Cluster {
	t.Helper()
	cs := []*cluster.Cluster{Start(t, Config(t, "node-0"))}
	for i := 1; i < n; i++ {
		cs = append(cs, Start(t, Config(t, fmt.Sprintf("node-%d", i), cs[0].LocalAddr())))
	}
	WaitConverged(t, Timeout, cs...)
	return cs
}

// Converged returns nil when every member of cs sees exactly the members of cs
// serving, with the RPC address and incarnation each announced.
func Converged(cs ...*cluster.Cluster) error {
	want := make(map[string]cluster.Member, len(cs))
	for _, c := range cs {
		want[c.Name()] = c.Self()
	}
	for _, c := range cs {
		alive := c.Alive()
		if len(alive) != len(want) {
			return fmt.Errorf("%s sees %d serving members %v; want %d", c.Name(), len(alive), names(alive), len(want))
		}
		for _, m := range alive {
			w, ok := want[m.Name]
			if !ok || m.RPCAddr != w.RPCAddr || m.Incarnation != w.Incarnation || m.Addr != w.Addr {
				return fmt.Errorf("%s sees %+v; want %+v", c.Name(), m, w)
			}
		}
	}
	return nil
}

// WaitConverged waits until Converged(cs...) holds, failing t at the deadline.
func WaitConverged(t testing.TB, timeout time.Duration, cs ...*cluster.Cluster) {
	t.Helper()
	wait.For(t, timeout, func() error { return Converged(cs...) })
}

// WaitState waits until observer sees the member called name in state want.
func WaitState(t testing.TB, timeout time.Duration, observer *cluster.Cluster, name string, want cluster.State) {
	t.Helper()
	wait.For(t, timeout, func() error {
		for _, m := range observer.Members() {
			if m.Name == name {
				if m.State != want {
					return fmt.Errorf("%s sees %s %s; want %s", observer.Name(), name, m.State, want)
				}
				return nil
			}
		}
		return fmt.Errorf("%s does not know %s", observer.Name(), name)
	})
}

// FreeAddr returns a 127.0.0.1 address whose port was free for both TCP and UDP a
// moment ago: for a member that must start after another names it as a seed.
// Another process could take the port in between; tests using it accept that.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := freeport.TCPAndUDP()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

func names(ms []cluster.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
