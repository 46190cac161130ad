package respapi

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// BenchmarkRESPIncr is one SW.INCR and its reply through a real socket, one at a time.
func BenchmarkRESPIncr(b *testing.B) {
	benchmarkPipeline(b, 1, 0)
}

// BenchmarkRESPIncrPipelined is 100 SW.INCR written at once, then their 100 replies;
// ns/op is per pipeline, ns/cmd per command. The remote case adds a fixed delay to
// every Do call, as a hop to a counter's owner in another node would: it shows what
// deciding a pipeline in one Do call saves.
func BenchmarkRESPIncrPipelined(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchmarkPipeline(b, 100, 0) })
	b.Run("remote", func(b *testing.B) { benchmarkPipeline(b, 100, time.Millisecond) })
}

// delayedDoer waits a fixed time in every Do call before deciding, like a round trip.
type delayedDoer struct {
	counter.Doer
	delay time.Duration
}

func (d delayedDoer) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	time.Sleep(d.delay)
	d.Doer.Do(ctx, ops, results)
}

func benchmarkPipeline(b *testing.B, depth int, delay time.Duration) {
	ts := startServer(b, func(c *Config) {
		if delay > 0 {
			c.Doer = delayedDoer{Doer: c.Doer, delay: delay}
		}
	})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	pipeline := []byte(strings.Repeat(encode("SW.INCR", "bench", "1m"), depth))
	calls := ts.doer.calls.Load()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(pipeline); err != nil {
			b.Fatal(err)
		}
		for range depth {
			line, err := rd.ReadSlice('\n')
			if err != nil || line[0] != ':' {
				b.Fatalf("reply %q, %v; want an integer", line, err)
			}
		}
	}
	cmds := float64(b.N * depth)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/cmds, "ns/cmd")
	b.ReportMetric(float64(ts.doer.calls.Load()-calls)/cmds, "do-calls/cmd")
}
