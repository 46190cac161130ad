package testredis

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) that monitors master
// under the given master name, and waits until it answers PING. Its URL for package
// fallback is redis+sentinel://<sentinel addr>/0?master=<name>.
func StartSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	return startSentinel(tb, master, name, "")
}

// StartQuickSentinel is StartSentinel with a quick failover: the master is taken as
// down after 1 s without an answer, and a replica promoted at once (its only sentinel
// is the quorum).
func StartQuickSentinel(tb testing.TB, master *Server, name string) *Server {
	tb.Helper()
	return startSentinel(tb, master, name, fmt.Sprintf("sentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 10000\n", name))
}

func startSentinel(tb testing.TB, master *Server, name, more string) *Server {
	tb.Helper()
	return start(tb, func(s *Server, port int) []string {
		conf := filepath.Join(s.dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n", name, master.Port()) + more
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatalf("testredis: sentinel config: %v", err)
		}
		return append([]string{conf, "--sentinel"}, s.commonArgs(port)...)
	})
}

// SentinelURL is the fallback URL of a sentinel-watched master.
func SentinelURL(sentinel *Server, name string) string {
	return "redis+sentinel://" + sentinel.Addr() + "/0?master=" + name
}
