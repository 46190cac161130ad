package respapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"

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

// BenchmarkGuard is redcon's reader taking commands from a connection with the guard
// (capConn: framing checked, commands handed over whole) and without it, in the same
// run: ns/op and MB/s are per command. "scan-only" is the guard's state machine alone;
// "mem" reads from memory in pieces of the given size; "tcp" reads from a loopback socket fed by another
// goroutine, with the node's default idle timeout, so each read also sets a deadline.
func BenchmarkGuard(b *testing.B) {
	incr := []byte(encode("SW.INCR", "user:12345", "1m"))
	allow := []byte(encode("SW.ALLOW", "api:key:6789", "10s", "100", "BY", "1", "BUCKETS", "10"))
	echo := []byte(encode("ECHO", strings.Repeat("x", 64<<10)))
	for _, c := range []struct {
		name  string
		cmd   []byte
		piece int
	}{
		{"incr/mem-4KiB", incr, 4096},
		{"incr/mem-64B", incr, 64},
		{"allow/mem-4KiB", allow, 4096},
		{"echo64KiB/mem-4KiB", echo, 4096},
		{"incr/tcp", incr, 0},
		{"echo64KiB/tcp", echo, 0},
	} {
		if c.piece == 4096 {
			b.Run(c.name+"/scan-only", func(b *testing.B) { benchmarkScan(b, c.cmd, c.piece) })
		}
		for _, guarded := range []bool{false, true} {
			name := c.name + "/none"
			if guarded {
				name = c.name + "/guard"
			}
			b.Run(name, func(b *testing.B) { benchmarkRead(b, c.cmd, c.piece, guarded) })
		}
	}
}

func benchmarkRead(b *testing.B, cmd []byte, piece int, guarded bool) {
	data := bytes.Repeat(cmd, max(1, (256<<10)/len(cmd)))
	var conn net.Conn = &repeatConn{pieceConn: pieceConn{sizes: []int{piece}}, data: data}
	if piece == 0 {
		conn = feedingSocket(b, data)
	}
	var r io.Reader = conn
	if guarded {
		r = &capConn{Conn: conn, cfg: connConfig{max: 1 << 62, idle: 5 * time.Minute, write: time.Second},
			guard: guard{maxBulk: 1 << 30}}
	}
	rd := redcon.NewReader(r)
	b.SetBytes(int64(len(cmd)))
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
func benchmarkScan(b *testing.B, cmd []byte, piece int) {
	data := bytes.Repeat(cmd, max(1, (256<<10)/len(cmd)))
	per := len(data) / len(cmd)
	g := guard{maxBulk: 1 << 30}
	b.SetBytes(int64(len(cmd)))
	b.ResetTimer()
	for n := 0; n < b.N; n += per {
		for off := 0; off < len(data); off += piece {
			if _, err := g.scan(data[off:min(off+piece, len(data))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// repeatConn reads data over and over, in pieces.
type repeatConn struct {
	pieceConn
	data []byte
	off  int
}

func (c *repeatConn) Read(p []byte) (int, error) {
	n := copy(p[:min(len(p), c.sizes[0])], c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

// feedingSocket is the reading end of a loopback connection whose other end writes
// data over and over until the benchmark ends.
func feedingSocket(b *testing.B, data []byte) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	r, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			if _, err := w.Write(data); err != nil {
				return
			}
		}
	}()
	b.Cleanup(func() { w.Close(); r.Close() })
	return r
}
