package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

func withClusterPort(cfg *node.Config) { cfg.RESPCluster = "127.0.0.1:0" }

func clusterClient(t testing.TB, c *nodetest.Cluster) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.Nodes[0].RESPClusterAddr()}, Protocol: 2,
		MaxRedirects: 8, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { cc.Close() })
	return cc
}

func forwarded(c *nodetest.Cluster) uint64 {
	var n uint64
	for _, nd := range c.Nodes {
		n += nd.RPCStats().Ops
	}
	return n
}

// go-redis's ClusterClient against three nodes: random ops one by one, in pipelines
// and in transactions answer exactly as one store does, and every op goes straight
// to its owner: no node forwards any.
func TestRedisClusterClientGoesStraightToOwners(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, withClusterPort)
	waitRedirecting(t, c)
	cc := clusterClient(t, c)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ref := &counter.Local{Store: leaparray.NewStore(), Now: c.Clock.Now}
	ctx := context.Background()
	before := forwarded(c)
	check := func(what string, op counter.Op, got any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %v %q (seed %d): %v", what, op.Kind, op.Key, seed, err)
		}
		res := make([]counter.Result, 1)
		ref.DecideNow([]counter.Op{op}, res)
		if want := respOf(op.Kind, res[0]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s %v %q (seed %d): got %v; want %v", what, op.Kind, op.Key, seed, got, want)
		}
	}
	for i := 0; i < 400; i++ {
		c.Clock.Advance(rng.Int64N(300))
		op, args := randomOp(rng, fmt.Sprint("k", rng.IntN(50)))
		got, err := cc.Do(ctx, args...).Result()
		check("Do", op, got, err)
	}
	for round := 0; round < 10; round++ { // pipelines across slots, and transactions within one
		for _, tx := range []bool{false, true} {
			var ops []counter.Op
			var cmds []*redis.Cmd
			tag := fmt.Sprint("{t", rng.IntN(20), "}")
			run := func(p redis.Pipeliner) error {
				for j := 0; j < 16; j++ {
					key := fmt.Sprint("k", rng.IntN(50))
					if tx {
						key = tag + fmt.Sprint(rng.IntN(3))
					}
					op, args := randomOp(rng, key)
					ops = append(ops, op)
					cmds = append(cmds, p.Do(ctx, args...))
				}
				return nil
			}
			var err error
			if tx {
				_, err = cc.TxPipelined(ctx, run)
			} else {
				_, err = cc.Pipelined(ctx, run)
			}
			if err != nil {
				t.Fatalf("pipeline (tx %v): %v", tx, err)
			}
			for j, cmd := range cmds {
				got, err := cmd.Result()
				check(fmt.Sprintf("pipeline (tx %v) command %d", tx, j), ops[j], got, err)
			}
		}
	}
	if got := forwarded(c) - before; got != 0 {
		t.Fatalf("nodes forwarded %d ops; want 0 (the client sends each to its owner)", got)
	}
}

// waitRedirecting waits until every node's cluster port answers -MOVED for a key of
// another node: a new ring is used a while before keys are redirected by it.
func waitRedirecting(t *testing.T, c *nodetest.Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		key := ""
		for i := 0; key == ""; i++ {
			if m, _ := n.Router().Ring().Owner(fmt.Sprint("probe", i)); m.Name != n.Name() {
				key = fmt.Sprint("probe", i)
			}
		}
		rc := redis.NewClient(&redis.Options{Addr: n.RESPClusterAddr(), Protocol: 2, MaxRetries: -1})
		if err := wait.True(nodetest.Timeout, func() bool {
			err := rc.Do(context.Background(), "SW.COUNT", key, "1s").Err()
			return err != nil && strings.HasPrefix(err.Error(), "MOVED ")
		}); err != nil {
			t.Fatalf("%s never redirected %s: %v", n.Name(), key, err)
		}
		rc.Close()
	}
}

// randomOp is an op on key and the command that does it.
func randomOp(rng *rand.Rand, key string) (counter.Op, []any) {
	op := counter.Op{Key: key, Window: 10_000, Buckets: 10, N: 1 + rng.Int64N(3), Limit: rng.Int64N(20)}
	switch rng.IntN(6) {
	case 0, 1:
		op.Kind = counter.Incr
		return op, []any{"SW.INCR", key, "10s", "BY", op.N}
	case 2:
		op.Kind = counter.Count
		return op, []any{"SW.COUNT", key, "10000"}
	case 3, 4:
		op.Kind = counter.Allow
		return op, []any{"SW.ALLOW", key, "10s", op.Limit, "BY", op.N, "BUCKETS", 10}
	}
	op.Kind = counter.Reset
	return op, []any{"SW.RESET", key, "10s"}
}

// A fourth node joins and one leaves while clients increment through a ClusterClient:
// the client follows -MOVED, every increment succeeds, and the counts are exact.
func TestRedisClusterClientFollowsMembershipChanges(t *testing.T) {
	c := nodetest.MakeCluster(t, 3, withClusterPort)
	cc := clusterClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	var acked [40]atomic.Int64
	var failures atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				k := i % len(acked)
				err := cc.Do(context.Background(), "SW.INCR", fmt.Sprint("m", k), "1h").Err()
				if err != nil {
					if failures.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				acked[k].Add(1)
			}
		})
	}
	c.Add()
	c.WaitConverged()
	if err := c.Stop(1); err != nil {
		t.Fatalf("stop node-1: %v", err)
	}
	c.WaitConverged()
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		mu.Lock()
		t.Errorf("%d increments failed, the first: %v", n, firstErr)
		mu.Unlock()
	}
	total := int64(0)
	for k := range acked {
		want := acked[k].Load()
		total += want
		got, err := cc.Do(context.Background(), "SW.COUNT", fmt.Sprint("m", k), "1h").Int64()
		if err != nil || got != want {
			t.Errorf("count of m%d = %d (%v); want %d acknowledged", k, got, err, want)
		}
	}
	if total == 0 {
		t.Fatal("no increment was acknowledged: the test did nothing")
	}
	t.Logf("%d increments acknowledged through a join and a leave", total)
}

// CLUSTER SLOTS names the address --resp-cluster-advertise gives (a published container
// port, say), not the one bound.
func TestRedisClusterAdvertisedAddress(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.RESPCluster, cfg.RESPClusterAdvertise = "127.0.0.1:0", "db.example:7380"
	})
	rc := redis.NewClient(&redis.Options{Addr: c.Nodes[0].RESPClusterAddr(), Protocol: 2})
	defer rc.Close()
	slots, err := rc.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || len(slots[0].Nodes) != 1 || slots[0].Nodes[0].Addr != "db.example:7380" {
		t.Fatalf("CLUSTER SLOTS = %+v; want slots 0-16383 at db.example:7380", slots)
	}
}
