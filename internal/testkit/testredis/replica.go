package testredis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
		rc := redis.NewClient(&redis.Options{Addr: r.Addr(), DialerRetries: 1, MaxRetries: -1})
		defer rc.Close()
		if info, _ := rc.Info(ctx, "replication").Result(); !strings.Contains(info, "master_link_status:up") {
			return errors.New("link not up")
		}
		return acknowledges(tb, m)
	})
}

// acknowledges is nil once a replica of m acknowledges a write made on m: a write and
// WAIT on one connection (WAIT counts the replicas that have that connection's last
// write). In a cluster the write's key is in a slot m serves.
func acknowledges(tb testing.TB, m *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	key := "testredis-follow"
	if lo, hi, ok := servedSlots(ctx, c, m.Port()); ok {
		for i := 0; ; i++ {
			k := "testredis-follow-" + strconv.Itoa(i)
			slot, err := c.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			if slot >= lo && slot <= hi {
				key = k
				break
			}
		}
	}
	pipe := c.Pipeline()
	pipe.Set(ctx, key, m.Addr(), 0)
	wait := pipe.Do(ctx, "WAIT", 1, 100)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	if n, _ := wait.Int64(); n < 1 {
		return errors.New("no replica acknowledged the write")
	}
	return nil
}

// servedSlots is the first range of slots the server on port serves as a master, by
// c's CLUSTER SLOTS; false when it serves none (not in cluster mode, say).
func servedSlots(ctx context.Context, c *redis.Client, port int) (lo, hi int64, ok bool) {
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return 0, 0, false
	}
	for _, s := range slots {
		if len(s.Nodes) > 0 && strings.HasSuffix(s.Nodes[0].Addr, ":"+strconv.Itoa(port)) {
			return int64(s.Start), int64(s.End), true
		}
	}
	return 0, 0, false
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
