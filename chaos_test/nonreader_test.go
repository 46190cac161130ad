package chaos_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/ring"
)

// A client that sends as fast as it can over one connection to node-0 and never reads
// its answers, a gRPC client (ShouldRateLimit), a RESP or HTTP/1.1 pipeliner, or a
// peer on the rpc port, costs only itself: node-0's other clients (HTTP incr and RESP
// SW.INCR, on keys of every owner, so most are forwarded) see no error, their p99 stays
// within 2x its baseline (with the same flood from a client that reads) + 5 ms (the 5 ms absorbs scheduling noise at a p99 of a few
// hundred µs on 2 cores), no node's lease lapses, and node-0's RSS grows by < 256 MiB.
// The hostile phase lasts LEAPCOUNT_NONREADER_PHASE (a Go duration; default 30s, 8s
// under -short). Run one kind with -run 'TestNonReadingClient/grpc'.
func TestNonReadingClient(t *testing.T) {
	phase := 30 * time.Second
	if testing.Short() {
		phase = 8 * time.Second
	}
	if v, err := time.ParseDuration(os.Getenv("LEAPCOUNT_NONREADER_PHASE")); err == nil && v > 0 {
		phase = v
	}
	for _, k := range []struct {
		name string
		addr func(*proctest.Node) string
		dial func(rng *rand.Rand, addr string) (hello []byte, next func([]byte) []byte)
	}{
		{"grpc", (*proctest.Node).GRPC, grpcCalls},
		{"resp", (*proctest.Node).RESP, respCalls},
		{"http", (*proctest.Node).HTTP, httpCalls},
		{"peer", func(n *proctest.Node) string { return n.Addrs().RPC }, peerCalls},
	} {
		t.Run(k.name, func(t *testing.T) {
			s := seed(t)
			rules := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(rules, []byte(nonreaderRules), 0o644); err != nil {
				t.Fatal(err)
			}
			c := proctest.StartCluster(t, 3, proctest.Options{Args: []string{"--limits", rules}, GRPC: true})
			n0 := c.Node(0)
			lapses := lapsesOf(t, c)
			v := startVictims(t, n0, rand.New(rand.NewPCG(s, 1)))
			// The baseline has the same flood from a client that reads its answers: on
			// two cores any flood costs the victims CPU; what is checked is that not
			// reading costs them nothing more.
			var control, h hostileStats
			base := v.run(5*time.Second, func(ctx context.Context) {
				control.flood(ctx, k.addr(n0), true, func() ([]byte, func([]byte) []byte) {
					return k.dial(rand.New(rand.NewPCG(s, 2)), k.addr(n0))
				})
			})
			rss0, err := n0.RSS()
			if err != nil {
				t.Fatal(err)
			}
			var maxRSS atomic.Int64
			hostile := v.run(phase, func(ctx context.Context) {
				go watchRSS(ctx, n0, &maxRSS)
				h.flood(ctx, k.addr(n0), false, func() ([]byte, func([]byte) []byte) {
					return k.dial(rand.New(rand.NewPCG(s, 3)), k.addr(n0))
				})
			})
			v.stop()
			t.Logf("reading %s client (baseline): %d bytes written on %d connections", k.name, control.written.Load(), control.dials.Load())
			t.Logf("hostile %s client: %d bytes written on %d connections, %d closed by the server, %d writes blocked for 200ms",
				k.name, h.written.Load(), h.dials.Load(), h.closed.Load(), h.blocked.Load())
			t.Logf("node-0 RSS: %d MiB after the baseline, at most %d MiB during the hostile phase", rss0>>20, maxRSS.Load()>>20)
			for i, kind := range victimKinds {
				b, x := base.series[i], hostile.series[i]
				limit := 2*b.p99() + 5*time.Millisecond
				t.Logf("%s victims: baseline %d ops (%.0f/s), %d errors, p99 %v; hostile %d ops (%.0f/s), %d errors, p99 %v (limit %v); errors %q",
					kind, len(b.lat), b.rate(), b.errs, b.p99(), len(x.lat), x.rate(), x.errs, x.p99(), limit, x.firstErrs)
				if b.errs > 0 {
					t.Errorf("%s victims failed %d times before the hostile client came: %q", kind, b.errs, b.firstErrs)
				}
				if x.errs > 0 {
					t.Errorf("%s victims failed %d times while the hostile %s client ran: %q", kind, x.errs, k.name, x.firstErrs)
				}
				if x.p99() > limit {
					t.Errorf("%s victims' p99 %v while the hostile %s client ran; want <= %v (2x the baseline %v + 5ms)", kind, x.p99(), k.name, limit, b.p99())
				}
			}
			if after := lapsesOf(t, c); !slices.Equal(after, lapses) {
				t.Errorf("leapcount_lease_lapses_total per node went from %v to %v", lapses, after)
			}
			if m := maxRSS.Load(); m > rss0+256<<20 {
				t.Errorf("node-0 RSS reached %d MiB (baseline %d MiB); want < baseline + 256 MiB", m>>20, rss0>>20)
			}
		})
	}
}

const nonreaderRules = "domain: nonreader\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n"

func lapsesOf(t *testing.T, c *proctest.Cluster) []int64 {
	var out []int64
	for _, n := range c.Nodes() {
		out = append(out, metric(t, n.HTTP(), "leapcount_lease_lapses_total"))
	}
	return out
}

// watchRSS keeps the largest RSS of n seen until ctx ends.
func watchRSS(ctx context.Context, n *proctest.Node, max *atomic.Int64) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if rss, err := n.RSS(); err == nil && rss > max.Load() {
			max.Store(rss)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ownedKeys returns n keys prefix<i> that owner owns in a ring of node-0..node-2.
func ownedKeys(prefix, owner string, n int) []string {
	rg := ring.New([]ring.Member{{Name: "node-0"}, {Name: "node-1"}, {Name: "node-2"}}, ring.Config{})
	var out []string
	for i := 0; len(out) < n; i++ {
		if m, _ := rg.Owner(fmt.Sprint(prefix, i)); m.Name == owner {
			out = append(out, fmt.Sprint(prefix, i))
		}
	}
	return out
}

// victims are well-behaved clients of node-0: each worker sends one op every
// victimPace (a slow answer delays the next: throughput falls) and records its
// latency or error in the current phase's series.
var victimKinds, victimPace = [2]string{"http", "resp"}, 5 * time.Millisecond

type series struct {
	lat       []time.Duration // of every op, failed or not
	errs      int
	firstErrs []string
	span      time.Duration
}

func (s *series) p99() time.Duration {
	l := append(slices.Clone(s.lat), 0) // 0 when there is none
	slices.Sort(l[:len(s.lat)])
	return l[len(s.lat)*99/100]
}

func (s *series) rate() float64 { return float64(len(s.lat)) / s.span.Seconds() }

type phaseStats struct {
	mu     sync.Mutex
	series [2]series
}

type victims struct {
	cur    atomic.Pointer[phaseStats]
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startVictims(t *testing.T, n0 *proctest.Node, rng *rand.Rand) *victims {
	var keys []string
	for _, owner := range []string{"node-0", "node-1", "node-2"} {
		keys = append(keys, ownedKeys("victim:", owner, 20)...)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	rdb := respClient(n0.RESP())
	t.Cleanup(func() { rdb.Close(); hc.CloseIdleConnections() })
	ops := [2]func(ctx context.Context, key string) error{
		func(ctx context.Context, key string) error {
			resp, err := hc.Post("http://"+n0.HTTP()+"/v1/incr", "application/json", strings.NewReader(`{"key":"`+key+`","window":"1m"}`))
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
			}
			return nil
		},
		func(ctx context.Context, key string) error { return rdb.Do(ctx, "SW.INCR", key, "1m").Err() },
	}
	v := &victims{}
	v.cur.Store(&phaseStats{})
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	for w := range 6 {
		kind := w % 2 // 3 HTTP workers, 3 RESP workers
		order := rng.Perm(len(keys))
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			tick := time.NewTicker(victimPace)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				ps, start := v.cur.Load(), time.Now()
				err := ops[kind](ctx, keys[order[i%len(order)]])
				d := time.Since(start)
				if ctx.Err() != nil {
					return
				}
				ps.mu.Lock()
				s := &ps.series[kind]
				s.lat = append(s.lat, d) // a failure's wait counts too
				if err != nil {
					s.errs++
					if len(s.firstErrs) < 3 {
						s.firstErrs = append(s.firstErrs, err.Error())
					}
				}
				ps.mu.Unlock()
			}
		}()
	}
	return v
}

// run records a phase of d (a span of traffic, not a wait for a condition) while
// during, if set, runs until its context ends; it returns the phase's series.
func (v *victims) run(d time.Duration, during func(context.Context)) *phaseStats {
	ps := &phaseStats{}
	v.cur.Store(ps)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if during != nil {
		during(ctx)
	}
	<-ctx.Done()
	v.cur.Store(&phaseStats{}) // what the workers answer from now on is another phase's
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i := range ps.series {
		ps.series[i].span = d
	}
	return ps
}

func (v *victims) stop() { v.cancel(); v.wg.Wait() }

// hostileStats counts what a flood did.
type hostileStats struct {
	written, dials, closed, blocked atomic.Int64
}

// flood keeps one connection to addr busy until ctx ends, reading what comes back
// (and dropping it) if told to, else never: it dials, writes hello, then next's bytes,
// as fast as the connection takes them. A write that blocks for 200ms goes on with
// what it did not write (the stream stays whole); one that fails (the server closed
// the connection) dials again with a new conn().
func (h *hostileStats) flood(ctx context.Context, addr string, read bool, conn func() (hello []byte, next func([]byte) []byte)) {
	var buf []byte
	for ctx.Err() == nil {
		nc, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			select { // back off from a refusing listener; not a condition
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		h.dials.Add(1)
		if read {
			go io.Copy(io.Discard, nc) // ends as nc closes
		} else {
			nc.(*net.TCPConn).SetReadBuffer(16 << 10) // never read: a small buffer fills soon
		}
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		hello, next := conn()
		pending := hello
		for ctx.Err() == nil {
			if len(pending) == 0 {
				buf = next(buf[:0])
				pending = buf
			}
			nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := nc.Write(pending)
			h.written.Add(int64(n))
			pending = pending[n:]
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				h.blocked.Add(1)
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					h.closed.Add(1)
				}
				break
			}
		}
		stop()
		nc.Close()
	}
}

// grpcCalls is a gRPC client of ShouldRateLimit: the HTTP/2 preface, SETTINGS and a
// connection WINDOW_UPDATE that open both windows wide (as Envoy's 256 MiB stream window
// does: answers are never held back by flow control), then calls of 8 descriptors of
// distinct values each (most counters are owned by another node), 32 per chunk, on odd
// stream ids counting up.
func grpcCalls(rng *rand.Rand, addr string) ([]byte, func([]byte) []byte) {
	msgs := make([][]byte, 256)
	for i := range msgs {
		req := &rlspb.RateLimitRequest{Domain: "nonreader", HitsAddend: 1}
		for range 8 {
			req.Descriptors = append(req.Descriptors, &commonpb.RateLimitDescriptor{
				Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprint("v", rng.IntN(100_000))}}})
		}
		b, err := proto.Marshal(req)
		if err != nil {
			panic(err)
		}
		msgs[i] = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	}
	var out, hb bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&hb)
	out.WriteString(http2.ClientPreface)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	hello := bytes.Clone(out.Bytes())
	id := uint32(1)
	return hello, func(dst []byte) []byte {
		out.Reset()
		for range 32 {
			hb.Reset()
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
				{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
				{"content-type", "application/grpc"}, {"te", "trailers"}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			fr.WriteData(id, true, msgs[rng.IntN(len(msgs))])
			id += 2
		}
		return append(dst, out.Bytes()...)
	}
}

// respCalls pipelines SW.INCR on distinct keys, 64 per chunk.
func respCalls(rng *rand.Rand, _ string) ([]byte, func([]byte) []byte) {
	return nil, func(dst []byte) []byte {
		for range 64 {
			key := fmt.Sprint("hostile:resp:", rng.IntN(100_000))
			dst = fmt.Appendf(dst, "*3\r\n$7\r\nSW.INCR\r\n$%d\r\n%s\r\n$3\r\n60s\r\n", len(key), key)
		}
		return dst
	}
}

// httpCalls pipelines HTTP/1.1 POST /v1/incr and GET /v1/count on distinct keys, 32
// per chunk.
func httpCalls(rng *rand.Rand, addr string) ([]byte, func([]byte) []byte) {
	return nil, func(dst []byte) []byte {
		for i := range 32 {
			key := fmt.Sprint("hostile:http:", rng.IntN(100_000))
			if i%2 == 1 {
				dst = fmt.Appendf(dst, "GET /v1/count?key=%s&window=60s HTTP/1.1\r\nHost: %s\r\n\r\n", key, addr)
				continue
			}
			body := `{"key":"` + key + `","window":"60s"}`
			dst = fmt.Appendf(dst, "POST /v1/incr HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
		}
		return dst
	}
}

// peerCalls is a peer on the rpc port (no --gossip-key or certificates: the handshake
// is a plain hello of the empty cluster name, peerauth/hello.go) that sends op frames
// (rpc/doc.go: type 1, forwarded, a budget of 2s) of 32 incrs each on counters node-0
// owns, and never reads their answers (nor the node's hello).
func peerCalls(rng *rand.Rand, _ string) ([]byte, func([]byte) []byte) {
	keys := ownedKeys("hostile:peer:", "node-0", 1024)
	id := uint64(1)
	return []byte("LCPEER1\x01\x00\x00"), func(dst []byte) []byte {
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0, 1)
		dst = binary.AppendUvarint(dst, id)
		id++
		dst = append(dst, 1)                  // forwarded
		dst = binary.AppendUvarint(dst, 0)    // epoch
		dst = binary.AppendUvarint(dst, 2000) // budget: 2s
		dst = binary.AppendUvarint(dst, 32)
		for range 32 {
			op := counter.Op{Kind: counter.Incr, Key: keys[rng.IntN(len(keys))], Window: 60_000, Buckets: 10, N: 1}
			dst = counter.Wire{}.AppendOp(dst, &op)
		}
		binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
		return dst
	}
}
