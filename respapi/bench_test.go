package respapi

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/hotkeys"
)

// BenchmarkRESPIncr is one SW.INCR and its reply through a real socket, one at a time.
func BenchmarkRESPIncr(b *testing.B) {
	benchmarkPipeline(b, 1, 0)
}

// BenchmarkRESPIncrPipelined is 100 SW.INCR written at once, then their 100 replies;
// ns/op is per pipeline, ns/cmd per command. The remote case adds a fixed delay to
// every Do call, as a hop to a counter's owner in another node would: it shows what
// deciding a pipeline in one Do call saves.
// "local-hotkeys" is local with the node's hot-key sketch hearing every op, as a node's
// owner does: its cost is local-hotkeys against local, in the same run.
func BenchmarkRESPIncrPipelined(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchmarkPipeline(b, 100, 0) })
	b.Run("local-hotkeys", func(b *testing.B) { benchmarkPipeline(b, 100, 0, withHotKeys) })
	b.Run("remote", func(b *testing.B) { benchmarkPipeline(b, 100, time.Millisecond) })
}

// withHotKeys gives the server's store a hot-key sketch, as node does.
func withHotKeys(c *Config) {
	c.Decider.(*countingDecider).local.Hot = hotkeys.New(hotkeys.Config{})
}

// delayed decides every batch later: it waits delay, like a round trip, and then has
// next decide it.
func delayed(next counter.Decider, delay time.Duration) counter.Decider {
	return counter.Waiting(func(ctx context.Context, ops []counter.Op, results []counter.Result) {
		time.Sleep(delay)
		counter.Do(ctx, next, ops, results)
	})
}

func benchmarkPipeline(b *testing.B, depth int, delay time.Duration, edits ...func(*Config)) {
	ts := startServer(b, func(c *Config) {
		for _, e := range edits {
			e(c)
		}
		if delay > 0 {
			c.Decider = delayed(c.Decider, delay)
		}
	})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	pipeline := []byte(strings.Repeat(encode("SW.INCR", "bench", "1m"), depth))
	calls := ts.decider.calls.Load()
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
	b.ReportMetric(float64(ts.decider.calls.Load()-calls)/cmds, "do-calls/cmd")
}

// BenchmarkRead is reading commands from memory, in pieces of the given size: the
// guard, framer and nextCommand as a session reads them ("framer"), and redcon's reader
// ("redcon"), in the same run; ns/op and MB/s are per command. "scan-only" is the
// guard's state machine alone.
func BenchmarkRead(b *testing.B) {
	incr := []byte(encode("SW.INCR", "user:12345", "1m"))
	allow := []byte(encode("SW.ALLOW", "api:key:6789", "10s", "100", "BY", "1", "BUCKETS", "10"))
	echo := []byte(encode("ECHO", strings.Repeat("x", 64<<10)))
	for _, c := range []struct {
		name  string
		cmd   []byte
		piece int
	}{
		{"incr/4KiB", incr, 4096},
		{"incr/64B", incr, 64},
		{"allow/4KiB", allow, 4096},
		{"echo64KiB/4KiB", echo, 4096},
	} {
		data := bytes.Repeat(c.cmd, max(1, (256<<10)/len(c.cmd)))
		b.Run(c.name+"/scan-only", func(b *testing.B) { benchmarkScan(b, data, len(c.cmd), c.piece) })
		b.Run(c.name+"/framer", func(b *testing.B) { benchmarkFramer(b, data, len(c.cmd), c.piece) })
		b.Run(c.name+"/redcon", func(b *testing.B) { benchmarkRedcon(b, data, len(c.cmd), c.piece) })
	}
}

func benchmarkFramer(b *testing.B, data []byte, cmdLen, piece int) {
	f := framer{guard: guard{maxBulk: 1 << 30}, max: 1 << 40}
	var args [][]byte
	b.SetBytes(int64(cmdLen))
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		for off := 0; off < len(data) && n < b.N; off += piece {
			in := f.add(data[off:min(off+piece, len(data))])
			k := 0
			for k < f.whole {
				a, m, err := nextCommand(in[k:f.whole], args[:0])
				if err != nil {
					b.Fatal(err)
				}
				args = a
				k += m
				n++
			}
			f.served(in, k, false)
		}
	}
}

func benchmarkRedcon(b *testing.B, data []byte, cmdLen, piece int) {
	rd := redcon.NewReader(&repeatReader{data: data, piece: piece})
	b.SetBytes(int64(cmdLen))
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		cmds, err := rd.ReadCommands()
		if err != nil {
			b.Fatal(err)
		}
		n += len(cmds)
	}
}

// benchmarkScan is the guard alone over commands in pieces.
func benchmarkScan(b *testing.B, data []byte, cmdLen, piece int) {
	per := len(data) / cmdLen
	g := guard{maxBulk: 1 << 30}
	b.SetBytes(int64(cmdLen))
	b.ResetTimer()
	for n := 0; n < b.N; n += per {
		for off := 0; off < len(data); off += piece {
			if _, err := g.scan(data[off:min(off+piece, len(data))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// repeatReader reads data over and over, in pieces.
type repeatReader struct {
	data  []byte
	piece int
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), r.piece)], r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}
