package testredis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// StartReplicated starts a master and a replica of it, in sync. Both start a replica's
// full sync at once (Redis waits 5 s by default for more replicas to share it).
func StartReplicated(tb testing.TB) (master, replica *Server) {
	tb.Helper()
	master = Start(tb, "--repl-diskless-sync-delay", "0")
	replica = Start(tb, "--repl-diskless-sync-delay", "0")
	Follow(tb, replica, master)
	return master, replica
}

// Follow makes r a replica of m and waits until it acknowledges a write made on m.
func Follow(tb testing.TB, r, m *Server) {
	tb.Helper()
	r.Do(tb, "REPLICAOF", "127.0.0.1", m.Port())
	Poll(tb, 20*time.Second, r.Addr()+" in sync with "+m.Addr(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if info, _ := r.Client(tb).Info(ctx, "replication").Result(); !strings.Contains(info, "master_link_status:up") {
			return errors.New("link not up")
		}
		// A write and WAIT on one connection: WAIT counts the replicas that have that
		// connection's last write.
		pipe := m.Client(tb).Pipeline()
		pipe.Set(ctx, "testredis-follow", r.Addr(), 0)
		wait := pipe.Do(ctx, "WAIT", 1, 100)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if n, _ := wait.Int64(); n < 1 {
			return errors.New("the replica acknowledged no write")
		}
		return nil
	})
}

// FailOverToStale leaves at master's address its replica's data, which lacks what the
// master ran since the replica stopped following it (REPLICAOF NO ONE on the replica):
// as a failover to that replica does, the old master then following it. master follows
// the replica, becomes a master again, and the replica follows it.
func FailOverToStale(tb testing.TB, master, replica *Server) {
	tb.Helper()
	Follow(tb, master, replica)
	master.Do(tb, "REPLICAOF", "NO", "ONE")
	Follow(tb, replica, master)
}
