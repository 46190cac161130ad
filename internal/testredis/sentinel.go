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
	return start(tb, func(s *Server, port int) []string {
		conf := filepath.Join(s.dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n", name, master.Port())
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
