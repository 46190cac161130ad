package node_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
	"github.com/leapcount/leapcount/rpc"
)

// BenchmarkForwarding sends SW.INCR over RESP from many clients for keys that node-1
// owns, either to node-1 itself (direct) or to node-0, which forwards them (forwarded),
// with the rpc batching on (default) or off (one op per frame). cpu-ns/op is the CPU
// time of the whole process (both nodes and the clients) per op: compare it between
// direct and forwarded in one run.
func BenchmarkForwarding(b *testing.B) {
	for _, batching := range []bool{true, false} {
		c := nodetest.MakeCluster(b, 2, func(cfg *node.Config) {
			if !batching {
				cfg.RPC = rpc.Config{MaxBatchOps: 1, Timeout: 2 * time.Second}
			}
		})
		keys := ownedBy(c, "node-1", 1000)
		for _, path := range []struct {
			name  string
			entry *node.Node
		}{{"direct", c.Nodes[1]}, {"forwarded", c.Nodes[0]}} {
			b.Run(fmt.Sprintf("%s/batching=%v", path.name, batching), func(b *testing.B) {
				before := c.Nodes[0].RPCStats()
				runIncrLoad(b, path.entry, keys)
				if after := c.Nodes[0].RPCStats(); after.Frames > before.Frames {
					b.ReportMetric(float64(after.Ops-before.Ops)/float64(after.Frames-before.Frames), "ops/frame")
				}
			})
		}
	}
}

func runIncrLoad(b *testing.B, entry *node.Node, keys []string) {
	cl := redis.NewClient(&redis.Options{Addr: entry.RESPAddr(), Protocol: 2, PoolSize: 64, MaxRetries: -1})
	defer cl.Close()
	var next atomic.Int64
	b.SetParallelism(32) // 64 concurrent clients on 2 cores
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			k := keys[next.Add(1)%int64(len(keys))]
			if err := cl.Do(ctx, "SW.INCR", k, "60s").Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func ownedBy(c *nodetest.Cluster, name string, n int) []string {
	rg := c.Nodes[0].Router().Ring()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprint("bench:", i)
		if m, _ := rg.Owner(k); m.Name == name {
			keys = append(keys, k)
		}
	}
	return keys
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
