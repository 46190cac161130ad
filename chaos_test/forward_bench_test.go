package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/ring"
)

// BenchmarkForwardingCPU runs two node processes and sends SW.INCR over RESP for keys
// node-1 owns, either to node-1 (direct) or to node-0 (forwarded), from 64 clients in
// this process. node-cpu-us/op is the CPU time of the two node processes (from /proc)
// per op: the cost of forwarding, without the clients' own. ops/s is the throughput.
func BenchmarkForwardingCPU(b *testing.B) {
	for _, mode := range [][2]string{{"512", "20us"}, {"512", "200us"}, {"1", "0"}} {
		batch, linger := mode[0], mode[1]
		c := proctest.StartCluster(b, 2, proctest.Options{Args: []string{"--forward-batch", batch, "--forward-linger", linger}})
		rg := ring.New([]ring.Member{{Name: "node-0"}, {Name: "node-1"}}, ring.Config{})
		var keys []string
		for i := 0; len(keys) < 1000; i++ {
			if m, _ := rg.Owner(fmt.Sprint("fw:", i)); m.Name == "node-1" {
				keys = append(keys, fmt.Sprint("fw:", i))
			}
		}
		for _, path := range []struct {
			name  string
			entry int
		}{{"direct", 1}, {"forwarded", 0}} {
			b.Run(fmt.Sprintf("%s/batch=%s,linger=%s", path.name, batch, linger), func(b *testing.B) {
				cl := redis.NewClient(&redis.Options{Addr: c.Node(path.entry).RESP(), Protocol: 2, PoolSize: 64, MaxRetries: -1})
				defer cl.Close()
				pids := []int{c.Node(0).Pid(), c.Node(1).Pid()}
				cpu0 := cpuOf(b, pids)
				start := time.Now()
				var next atomic.Int64
				var wg sync.WaitGroup
				for w := 0; w < 64; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							if err := cl.Do(context.Background(), "SW.INCR", keys[i%int64(len(keys))], "60s").Err(); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.ReportMetric(float64((cpuOf(b, pids)-cpu0).Microseconds())/float64(b.N), "node-cpu-us/op")
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
			})
		}
	}
}

// cpuOf is the CPU time (user and system) the processes have used, from /proc.
func cpuOf(b *testing.B, pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(fields[11], 10, 64)         // utime: field 14 of stat
		st, _ := strconv.ParseInt(fields[12], 10, 64)         // stime: field 15
		total += time.Duration(ut+st) * 10 * time.Millisecond // clock ticks of 1/100 s
	}
	return total
}
