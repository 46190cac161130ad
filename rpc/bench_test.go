package rpc

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/peerauth"
)

func benchOps(n int) []counter.Op {
	ops := make([]counter.Op, n)
	for i := range ops {
		ops[i] = incr(fmt.Sprintf("user:%08d", i), 1)
	}
	return ops
}

// BenchmarkCodec encodes and decodes a 100-op request with this package's codec and with
// encoding/gob (a fresh encoder per frame, as frames go to different peers): the reason
// the wire format is hand-written.
func BenchmarkCodec(b *testing.B) {
	req := fwd(benchOps(100)...)
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		var out testRequest
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			buf = appendRequestFrame(buf[:0], uint64(i), req)
			if _, err := decodeRequestFrame(buf[4:], &out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes/frame")
	})
	b.Run("gob", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			buf.Reset()
			if err := gob.NewEncoder(&buf).Encode(&req); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(buf.Len()), "bytes/frame")
			var out testRequest
			if err := gob.NewDecoder(&buf).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkForward sends single-op calls from many goroutines to one owner over real
// loopback TCP, with batching on (many calls per frame) and off (one call per frame).
// ops/frame shows how many calls each frame carried.
func BenchmarkForward(b *testing.B) {
	for _, mode := range []struct {
		name string
		cfg  Config
	}{
		{"batching=on", Config{}}, // the default linger
		{"batching=on,linger=0", Config{Linger: -1}},
		{"batching=on,linger=100us", Config{Linger: 100 * time.Microsecond}},
		{"batching=off", Config{MaxBatchOps: 1}},
		{"batching=on,inline", Config{}}, // frames decided in the reader, as nodes do
		{"batching=off,inline", Config{MaxBatchOps: 1}},
		{"batching=on,auth=key", Config{}},
		{"batching=off,auth=key", Config{MaxBatchOps: 1}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var setup []func(*testServer)
			if strings.Contains(mode.name, "auth=key") { // TLS 1.3 and a key proof (package peerauth)
				a, err := peerauth.New(peerauth.Config{Keys: [][]byte{[]byte("0123456789abcdef")}})
				if err != nil {
					b.Fatal(err)
				}
				setup = append(setup, func(s *testServer) { s.SetHandshake(a.Server) })
				var d net.Dialer
				mode.cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
					nc, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						return nil, err
					}
					return a.Client(ctx, nc)
				}
			}
			if strings.Contains(mode.name, "inline") {
				setup = append(setup, func(s *testServer) { s.SetInline(func() bool { return true }) })
			}
			o := startOwner(&testing.T{}, "", setup...)
			defer o.srv.Close()
			c := newTestClient(mode.cfg)
			defer c.Close()
			b.SetParallelism(32) // many callers at once, as behind a busy front end
			b.ReportAllocs()
			cpu := startCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				res := make([]counter.Result, 1)
				for pb.Next() {
					if err := c.Do(context.Background(), o.addr, fwd(incr("k", 1)), res); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(cpu.perOp(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/float64(max(1, o.frames.Load())), "ops/frame")
		})
	}
}

// cpuClock measures the CPU time (user and system) this process spends, which on a
// shared machine says more about cost than wall time does.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) perOp(n int) float64 { return float64(processCPU()-c.start) / float64(n) }

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
