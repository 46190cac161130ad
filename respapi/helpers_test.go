package respapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/clocktest"
	"github.com/leapcount/leapcount/leaparray"
)

// t0 is a whole minute, so buckets of up to a minute start exactly at it.
const t0 = 1_700_000_040_000

func newClock() *clocktest.Clock { return clocktest.New(t0) }

// countingDecider passes ops on to a real Local and counts the calls that decided them
// and the ops, so tests can see how a pipeline was batched. It decides every batch at
// once but those with a key under "wait:", which it decides later (as a router does
// with forwarded ops): on a goroutine of its own while gate, when set, holds them until
// it is closed; without a gate before Decide returns (as a node that refuses them does).
type countingDecider struct {
	local       *counter.Local
	calls, ops  atomic.Int64
	parked      atomic.Int64                  // batches decided later
	gate        atomic.Pointer[chan struct{}] // when set, "wait:" ops wait until it is closed
	onGoroutine bool                          // "wait:" ops are decided on a goroutine even without a gate
}

func (d *countingDecider) Decide(ctx context.Context, b *counter.Batch) bool {
	if !waits(b.Ops) {
		d.decide(b.Ops, b.Results)
		return true
	}
	d.parked.Add(1)
	gate := d.gate.Load()
	if gate == nil && !d.onGoroutine {
		d.decide(b.Ops, b.Results)
		b.Done()
		return false
	}
	go func() {
		if gate != nil {
			select {
			case <-*gate:
			case <-ctx.Done():
			}
		}
		d.decide(b.Ops, b.Results)
		b.Done()
	}()
	return false
}

func (d *countingDecider) decide(ops []counter.Op, results []counter.Result) {
	d.calls.Add(1)
	d.ops.Add(int64(len(ops)))
	d.local.DecideNow(ops, results)
}

func waits(ops []counter.Op) bool {
	for i := range ops {
		if strings.HasPrefix(ops[i].Key, "wait:") {
			return true
		}
	}
	return false
}

// waysToWait are the two ways a batch is decided later: its Done called before Decide
// returns, or from another goroutine.
var waysToWait = []struct {
	name string
	edit func(*Config)
}{{"done-at-once", nil}, {"done-later", func(cfg *Config) { cfg.Decider.(*countingDecider).onGoroutine = true }}}

// failingDecider fails every op with err, as an unreachable owner would.
type failingDecider struct{ err error }

func (d failingDecider) Decide(_ context.Context, b *counter.Batch) bool {
	for i := range b.Results {
		b.Results[i] = counter.Result{Err: d.err}
	}
	return true
}

// testServer is a server on a real socket, deciding ops with a real store.
type testServer struct {
	addr string
	// clusterAddr is ServeCluster's listener, when Config.Cluster is set.
	clusterAddr string
	srv         *Server
	clock       *clocktest.Clock
	decider     *countingDecider
	reg         *prometheus.Registry
}

// startServer serves on 127.0.0.1:0 until the test ends; edit, when not nil, changes
// the config before New.
func startServer(t testing.TB, edit func(*Config)) *testServer {
	t.Helper()
	clock := newClock()
	decider := &countingDecider{local: &counter.Local{Store: leaparray.NewStore(), Now: clock.Now}}
	reg := prometheus.NewRegistry()
	cfg := Config{Decider: decider, Registerer: reg}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if serveStreams {
		ln = streamListener{ln}
	}
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	ts := &testServer{addr: ln.Addr().String(), srv: srv, clock: clock, decider: decider, reg: reg}
	serving := 1
	if cfg.Cluster != nil {
		cln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("Listen: %v", err)
		}
		ts.clusterAddr = cln.Addr().String()
		go func() { served <- srv.ServeCluster(cln) }()
		serving++
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range serving {
			if err := <-served; err != nil {
				t.Errorf("Serve returned %v after Close; want nil", err)
			}
		}
	})
	return ts
}

// serveStreams makes startServer's connections ones the event loops cannot poll, so
// they are served on goroutines of their own (stream.go). Set by TestStreamConnections
// only, which is not parallel with anything.
var serveStreams bool

// streamListener hands out connections that are not *net.TCPConn.
type streamListener struct{ net.Listener }

func (l streamListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{c}, nil
}

// rawClient speaks RESP by hand, to send what a client library would not and to
// see replies byte for byte.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	rd   *bufio.Reader
}

func (ts *testServer) dial(t testing.TB) *rawClient {
	t.Helper()
	return dialAddr(t, ts.addr)
}

// dialCluster connects to ServeCluster's listener.
func (ts *testServer) dialCluster(t testing.TB) *rawClient {
	t.Helper()
	return dialAddr(t, ts.clusterAddr)
}

func dialAddr(t testing.TB, addr string) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// encode writes args as a RESP array of bulk strings.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func (c *rawClient) write(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, raw); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// do sends one command and returns its reply.
func (c *rawClient) do(args ...string) string {
	c.t.Helper()
	c.write(encode(args...))
	return c.reply()
}

// reply reads one reply and renders it as text: "+OK", "-ERR ...", ":5", "$bulk",
// "$-1" for a null, and "*[a b c]" for an array.
func (c *rawClient) reply() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	s, err := readReply(c.rd)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	return s
}

func readReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', '-', ':':
		return line, nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return line, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return "$" + string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		elems := make([]string, n)
		for i := range elems {
			if elems[i], err = readReply(rd); err != nil {
				return "", err
			}
		}
		return "*[" + strings.Join(elems, " ") + "]", nil
	}
	return "", fmt.Errorf("unknown reply %q", line)
}

// wantClosed checks that the server closed the connection: EOF, or a reset when the
// server closed it with bytes from the client still unread.
func (c *rawClient) wantClosed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := c.rd.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("got %q, %v; want the connection closed (EOF)", b, err)
	}
}

// wantServes checks that the connection still answers a good command.
func (c *rawClient) wantServes() {
	c.t.Helper()
	if got := c.do("SW.COUNT", "still-serves", "1s"); got != ":0" {
		c.t.Fatalf("after an error, SW.COUNT got %s; want :0", got)
	}
}

func wantReply(t testing.TB, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("got %q; want %q", got, want)
	}
}

// metricValue is the value of leapcount_resp_commands_total for command and outcome.
func (ts *testServer) metricValue(t testing.TB, command, outcome string) float64 {
	t.Helper()
	return ts.metric(t, "leapcount_resp_commands_total", "command", command, "outcome", outcome)
}

// metric is the value of the counter name with the given label pairs (name, value, ...).
func (ts *testServer) metric(t testing.TB, name string, labelPairs ...string) float64 {
	t.Helper()
	families, err := ts.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labelPairs); i += 2 {
				if labels[labelPairs[i]] != labelPairs[i+1] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labelPairs)
	return 0
}

// histogramCount is the observation count of the histogram name (0 when absent).
func (ts *testServer) histogramCount(t testing.TB, name string) uint64 {
	t.Helper()
	families, err := ts.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
