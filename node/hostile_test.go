package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/leapcount/leapcount/internal/testkit/hostile"
	"github.com/leapcount/leapcount/internal/testkit/longtest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
)

// The hostile-client table of docs/security.md (Hostile clients), attack by attack,
// against one node over real sockets: while the attack runs, a well-behaved client of
// every port sends requests, and must see no error and a p99 latency within twice the
// larger of the baselines measured just before and just after, without the attacker;
// the process's goroutines and heap stay within a bound per hostile connection; and
// every hostile connection is cut within the documented time. The HTTP/2 attackers and
// openssl run in processes of their own at the lowest CPU priority: on another machine
// their CPU would not be the node's, and on two shared cores their bursts alone move a
// p99 of a millisecond past twice (the node's work for them stays in its process).
//
// Timeouts shortened for the test: the TLS handshake 2 s (10 s by default), a gRPC
// request 1 s (10 s). The rpc port's handshake keeps its 5 s.
const (
	hostileHandshake = 2 * time.Second
	hostileRequest   = time.Second
	rpcHandshake     = 5 * time.Second // peerauth.DefaultTimeout
	goodEvery        = 2 * time.Millisecond
	attackFor        = 3 * time.Second        // how long a reconnecting attacker goes on
	reconnectEvery   = 100 * time.Millisecond // how often it opens its next connection
)

// goodClient sends one request every goodEvery and records each one's latency.
type goodClient struct {
	name string
	mu   sync.Mutex
	seen []goodSample
}

type goodSample struct {
	at  time.Time
	lat time.Duration
	err error
}

func (g *goodClient) run(ctx context.Context, do func(ctx context.Context) error) {
	tick := time.NewTicker(goodEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		start := time.Now()
		err := do(ctx)
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		g.seen = append(g.seen, goodSample{start, time.Since(start), err})
		g.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// span is a stretch of time, [from, to).
type span struct{ from, to time.Time }

// window is the p99 of the requests sent in spans, their number, and their errors.
func (g *goodClient) window(spans ...span) (p99 time.Duration, n int, errs []error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var lats []time.Duration
	for _, s := range g.seen {
		if !slices.ContainsFunc(spans, func(w span) bool { return !s.at.Before(w.from) && s.at.Before(w.to) }) {
			continue
		}
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		lats = append(lats, s.lat)
	}
	if len(lats) == 0 {
		return 0, 0, errs
	}
	slices.Sort(lats)
	return lats[len(lats)*99/100], len(lats), errs
}

// peaks samples the process's goroutines and heap while an attack runs.
type peaks struct {
	goroutines int
	heap       uint64
}

func sample() peaks {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return peaks{runtime.NumGoroutine(), ms.HeapInuse}
}

func watchPeaks(ctx context.Context) <-chan peaks {
	out := make(chan peaks, 1)
	go func() {
		p := sample()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- p
				return
			case <-t.C:
			}
			s := sample()
			p.goroutines, p.heap = max(p.goroutines, s.goroutines), max(p.heap, s.heap)
		}
	}()
	return out
}

// hostileRig is the node, its well-behaved clients, and the figures of each attack.
type hostileRig struct {
	tn      *tlsNode
	goods   []*goodClient
	stop    context.CancelFunc
	clients sync.WaitGroup
}

func startHostileRig(t *testing.T) *hostileRig {
	tn := startTLSNode(t, false, func(cfg *node.Config) {
		cfg.TLSHandshakeTimeout, cfg.GRPCRequestTimeout = hostileHandshake, hostileRequest
		cfg.GossipKeys = [][]byte{bytes.Repeat([]byte{7}, 32)} // the rpc port speaks TLS
	})
	r := &hostileRig{tn: tn}
	conf := goTLS(t, tn.pool, nil)
	rc := goRedis(t, tn.n.RESPTLSAddr(), conf)
	hc := httpsClient(conf)
	grpcConn := func(addr string, opt grpc.DialOption) rlspb.RateLimitServiceClient {
		c, err := grpc.NewClient(addr, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return rlspb.NewRateLimitServiceClient(c)
	}
	plain := grpcConn(tn.n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	overTLS := rlsOverTLS(t, tn.n.GRPCTLSAddr(), conf)
	rls := func(c rlspb.RateLimitServiceClient) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.ShouldRateLimit(ctx, oneDescriptor("edge", "user", "good"))
			return err
		}
	}
	ports := map[string]func(ctx context.Context) error{
		"resp-tls": func(ctx context.Context) error { return rc.Do(ctx, "SW.INCR", "good", "1h").Err() },
		"http-tls": func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+tn.n.HTTPTLSAddr()+"/v1/incr", strings.NewReader(`{"key":"good","window":"1h"}`))
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			return nil
		},
		"grpc":     rls(plain),
		"grpc-tls": rls(overTLS),
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	for _, name := range []string{"resp-tls", "http-tls", "grpc", "grpc-tls"} {
		do := ports[name]
		wait.For(t, 10*time.Second, func() error { return do(context.Background()) }) // it answers before the baselines start
		g := &goodClient{name: name}
		r.goods = append(r.goods, g)
		r.clients.Go(func() { g.run(ctx, do) })
	}
	t.Cleanup(func() { cancel(); r.clients.Wait() })
	return r
}

// quiet waits d with no attacker.
func quiet(d time.Duration) span {
	from := time.Now()
	time.Sleep(d) // the baseline is a length of time, not a condition
	return span{from, time.Now()}
}

// attack runs attack, which returns once every hostile connection it opened was cut
// (or fails the test), between two quiet baselines of 1.5 s; conns is how many hostile
// connections it holds open at once.
func (r *hostileRig) attack(t *testing.T, conns int, attack func(t *testing.T)) {
	t.Helper()
	r.measure(t, conns, func() (quiet1, under, quiet2 []span) {
		q1 := quiet(1500 * time.Millisecond)
		from := time.Now()
		attack(t)
		a := span{from, time.Now()}
		return []span{q1}, []span{a}, []span{quiet(1500 * time.Millisecond)}
	})
}

// attackInterleaved runs an attacker that goes on for as long as it is told (run,
// which returns when it attacked), for three stretches of attackFor/3, each after a
// quiet one as long: the machine's other load, which comes and goes, falls on both
// alike.
func (r *hostileRig) attackInterleaved(t *testing.T, conns int, run func(t *testing.T, d time.Duration) span) {
	t.Helper()
	r.measure(t, conns, func() (quiet1, under, quiet2 []span) {
		for range 3 {
			quiet1 = append(quiet1, quiet(attackFor/3))
			under = append(under, run(t, attackFor/3))
		}
		return quiet1, under, []span{quiet(attackFor / 3)}
	})
}

// measure runs one attack (phases) and checks the well-behaved clients and the
// process's bounds. Errors, bounds and cuts must hold in every run; the p99 in one of
// up to latencyTries runs: the machine's other load comes and goes (an attacker the
// node does not bound slows every run).
func (r *hostileRig) measure(t *testing.T, conns int, phases func() (quiet1, under, quiet2 []span)) {
	t.Helper()
	for try := 1; ; try++ {
		slow := r.measureOnce(t, conns, phases)
		if len(slow) == 0 || t.Failed() {
			return
		}
		if !strictLatency() {
			for _, s := range slow {
				t.Logf("latency not held (measured, not asserted: %s unset): %s", strictLatencyEnv, s)
			}
			return
		}
		if try == latencyTries {
			for _, s := range slow {
				t.Error(s)
			}
			return
		}
		t.Logf("run %d: %s; again", try, slow[0])
	}
}

const latencyTries = 3

// strictLatencyEnv, set to 1, makes the p99 bound an assertion. Unset (make test-long),
// the p99s are measured and logged: with the attacker, the node and the good clients on
// one loaded 2-core machine, the attacker's own CPU moves the others' p99 past twice
// their baseline in some runs whatever the node bounds (docs/security.md, Hostile
// clients).
const strictLatencyEnv = "LEAPCOUNT_HOSTILE_STRICT_P99"

func strictLatency() bool { return os.Getenv(strictLatencyEnv) == "1" }

func (r *hostileRig) measureOnce(t *testing.T, conns int, phases func() (quiet1, under, quiet2 []span)) (slow []string) {
	t.Helper()
	runtime.GC()
	base := sample()
	ctx, cancel := context.WithCancel(context.Background())
	peak := watchPeaks(ctx)
	q1, under, q2 := phases()
	cancel()
	p := <-peak
	// Bounds: per hostile connection at most 4 goroutines (the node's; the attackers run in processes of their own)
	// and 128 KiB of heap, beside 200 goroutines and 32 MiB of slack for the rest.
	if g := p.goroutines - base.goroutines; g > 200+4*conns {
		t.Errorf("goroutines rose by %d under the attack (%d hostile connections)", g, conns)
	}
	if h := int64(p.heap) - int64(base.heap); h > 32<<20+int64(conns)*128<<10 {
		t.Errorf("heap rose by %d MiB under the attack (%d hostile connections)", h>>20, conns)
	}
	var took time.Duration
	for _, a := range under {
		took += a.to.Sub(a.from)
	}
	for _, g := range r.goods {
		pb, nb, eb := g.window(q1...)
		pa, na, ea := g.window(q2...)
		p99, n, errs := g.window(under...)
		errs = append(errs, append(eb, ea...)...)
		if len(errs) > 0 {
			t.Errorf("%s: %d requests failed, the first: %v", g.name, len(errs), errs[0])
		}
		limit := 2 * max(pb, pa)
		t.Logf("%s: p99 %v under the attack (%d requests, %v); without: %v (%d) and %v (%d); peak goroutines %d (base %d), heap %d MiB (base %d MiB)",
			g.name, p99.Round(time.Microsecond), n, took.Round(time.Millisecond), pb.Round(time.Microsecond), nb, pa.Round(time.Microsecond), na, p.goroutines, base.goroutines, p.heap>>20, base.heap>>20)
		if n < 50 {
			slow = append(slow, fmt.Sprintf("%s: only %d requests under the attack", g.name, n))
		}
		if p99 > limit {
			slow = append(slow, fmt.Sprintf("%s: p99 %v under the attack; limit %v (twice the baselines %v, %v)", g.name, p99, limit, pb, pa))
		}
	}
	return slow
}

// tlsPorts are the node's TLS ports and how long each gives a handshake.
func (r *hostileRig) tlsPorts() map[string]time.Duration {
	n := r.tn.n
	return map[string]time.Duration{n.RESPTLSAddr(): hostileHandshake, n.HTTPTLSAddr(): hostileHandshake,
		n.GRPCTLSAddr(): hostileHandshake, n.RPCAddr(): rpcHandshake}
}

// tlsPortsOrder is tlsPorts for the attacker process: addr=timeout, comma-separated.
func (r *hostileRig) tlsPortsOrder() string {
	var out []string
	for addr, timeout := range r.tlsPorts() {
		out = append(out, addr+"="+timeout.String())
	}
	return strings.Join(out, ",")
}

// parsePorts reads tlsPortsOrder.
func parsePorts(t *testing.T, order string) map[string]time.Duration {
	ports := map[string]time.Duration{}
	for _, p := range strings.Split(order, ",") {
		addr, timeout, _ := strings.Cut(p, "=")
		d, err := time.ParseDuration(timeout)
		if err != nil {
			t.Fatalf("ports %q: %v", order, err)
		}
		ports[addr] = d
	}
	return ports
}

// cutWithin opens conns connections to every port, runs client on each, and checks
// that the node closes each within its port's handshake timeout (and a second of
// slack for a loaded machine).
func cutWithin(t *testing.T, ports map[string]time.Duration, conns int, client func(nc net.Conn)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var late []string
	for addr, timeout := range ports {
		for range conns {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			opened := time.Now()
			go client(nc)
			wg.Go(func() {
				defer nc.Close()
				if !hostile.ClosedWithin(nc, timeout+time.Second) {
					mu.Lock()
					late = append(late, fmt.Sprintf("%s open after %v", addr, time.Since(opened).Round(time.Millisecond)))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(late) > 0 {
		t.Errorf("%d handshakes not cut in time, such as %s", len(late), late[0])
	}
}

func TestHostileClientsCostOthersNothing(t *testing.T) {
	longtest.Skip(t) // two to three minutes: make test-long runs it
	r := startHostileRig(t)
	for _, a := range []string{handshakeNeverSent, slowHello} {
		t.Run(a, func(t *testing.T) {
			r.attack(t, 4*handshakeConns, func(t *testing.T) { r.inAttacker(t, a, 0) }) // (its start-up counted in)
		})
	}
	t.Run("renegotiation", func(t *testing.T) {
		openssl := tool(t, "openssl", "Debian's openssl")
		r.attackInterleaved(t, 3, func(t *testing.T, d time.Duration) span { // one try a port each time
			from := time.Now()
			var wg sync.WaitGroup
			for _, addr := range []string{r.tn.n.RESPTLSAddr(), r.tn.n.HTTPTLSAddr(), r.tn.n.GRPCTLSAddr()} {
				wg.Go(func() { renegotiationRefused(t, openssl, addr, r.tn.ca.File) })
			}
			wg.Wait()
			time.Sleep(time.Until(from.Add(d))) // the stretch is a length of time
			return span{from, time.Now()}
		})
	})
	for _, a := range hostile.H2Attacks {
		t.Run(string(a), func(t *testing.T) {
			run := func(t *testing.T, d time.Duration) span { return r.inAttacker(t, string(a), d) }
			if a == hostile.AbandonedStreams { // each connection lasts its request timeout
				r.attack(t, 2, func(t *testing.T) { run(t, attackFor) }) // (its start-up counted in)
				return
			}
			r.attackInterleaved(t, 2, run)
		})
	}
}

// inAttacker runs attack (an hostile.H2, handshakeNeverSent or slowHello) against the
// node from a copy of this test binary at the lowest CPU priority (nice 19;
// TestHostileAttacker), for d (the HTTP/2 attacks, on the gRPC port in plaintext and
// over TLS at once), and returns the stretch it attacked in. On another machine the
// attacker's own CPU would not be the node's; here it takes nothing the node and the
// well-behaved clients want. What the node spends on the attack counts in full: it
// is its own process's.
func (r *hostileRig) inAttacker(t *testing.T, attack string, d time.Duration) span {
	t.Helper()
	cmd := exec.Command("nice", "-n", "19", os.Args[0], "-test.run=^TestHostileAttacker$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), attackEnv+"="+attack, attackForEnv+"="+d.String(), attackPortsEnv+"="+r.tlsPortsOrder(),
		attackPlainEnv+"="+r.tn.n.GRPCAddr(), attackTLSEnv+"="+r.tn.n.GRPCTLSAddr(), attackCAEnv+"="+r.tn.ca.File)
	out, err := cmd.CombinedOutput()
	var from, to int64
	if i := bytes.Index(out, []byte(attackedLine)); i >= 0 {
		fmt.Sscanf(string(out[i+len(attackedLine):]), "%d %d", &from, &to)
	}
	if err != nil || from == 0 || !bytes.Contains(out, []byte("--- PASS: TestHostileAttacker")) {
		t.Fatalf("the attacker process failed (%v):\n%s", err, out)
	}
	// The stretch it attacked in, not its start-up (a process of this size takes tens
	// of milliseconds to start).
	return span{time.Unix(0, from), time.Unix(0, to)}
}

// The TLS handshake attacks, beside hostile.H2's, and how many connections they open
// to each TLS port (and the rpc port).
const (
	handshakeNeverSent = "handshake never sent"
	slowHello          = "ClientHello a byte at a time"
	handshakeConns     = 50
)

// The attacker process's orders (inAttacker).
const (
	attackEnv      = "LEAPCOUNT_HOSTILE_ATTACK"
	attackForEnv   = "LEAPCOUNT_HOSTILE_ATTACK_FOR"
	attackPlainEnv = "LEAPCOUNT_HOSTILE_GRPC"
	attackTLSEnv   = "LEAPCOUNT_HOSTILE_GRPC_TLS"
	attackCAEnv    = "LEAPCOUNT_HOSTILE_CA"
	attackPortsEnv = "LEAPCOUNT_HOSTILE_TLS_PORTS" // addr=handshake timeout, ...
	// attackedLine, followed by two Unix times in ns, is when the attacker began and
	// ended (its output).
	attackedLine = "attacked from, to: "
)

// TestHostileAttacker is the attacker process of inAttacker; run alone, it has no orders
// and skips.
func TestHostileAttacker(t *testing.T) {
	a := hostile.H2(os.Getenv(attackEnv))
	if a == "" {
		t.Skip("the attacker process of TestHostileClientsCostOthersNothing (inAttacker)")
	}
	from := time.Now()
	defer func() { fmt.Printf("%s%d %d\n", attackedLine, from.UnixNano(), time.Now().UnixNano()) }()
	switch a {
	case handshakeNeverSent:
		cutWithin(t, parsePorts(t, os.Getenv(attackPortsEnv)), handshakeConns, func(net.Conn) {})
		return
	case slowHello:
		hello := hostile.ClientHello()
		cutWithin(t, parsePorts(t, os.Getenv(attackPortsEnv)), handshakeConns, func(nc net.Conn) { hostile.SlowHello(nc, hello, 50*time.Millisecond) })
		return
	}
	d, err := time.ParseDuration(os.Getenv(attackForEnv))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(os.Getenv(attackCAEnv))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	// Sessions resumed as it reconnects, as an attacker that minds its own CPU does:
	// each new connection then costs no signature either side.
	conf := &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	var wg sync.WaitGroup
	wg.Go(func() { h2AttackLoop(t, a, os.Getenv(attackPlainEnv), nil, d) })
	wg.Go(func() { h2AttackLoop(t, a, os.Getenv(attackTLSEnv), conf, d) })
	wg.Wait()
}

// h2AttackLoop runs a against addr (over TLS with conf, when given) on one connection
// after another for d, a new one every reconnectEvery at most, each cut by the node: a
// flood with GOAWAY ENHANCE_YOUR_CALM at once (within a second here), abandoned streams
// once their request timeout passes. (An attacker that reconnects as fast as it can is
// a connection flood: --max-clients and a firewall's per-address limits.)
func h2AttackLoop(t *testing.T, a hostile.H2, addr string, conf *tls.Config, d time.Duration) {
	const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	cut := time.Second
	if a == hostile.AbandonedStreams {
		cut = 2*hostileRequest + time.Second // the stall check ticks every quarter of it
	}
	next := time.NewTicker(reconnectEvery)
	defer next.Stop()
	end := time.Now().Add(d)
	for conns := 0; conns == 0 || time.Now().Before(end); conns++ {
		var nc net.Conn
		var err error
		if conf != nil {
			nc, err = tls.Dial("tcp", addr, conf)
		} else {
			nc, err = net.Dial("tcp", addr)
		}
		if err != nil {
			t.Error(err)
			return
		}
		opened := time.Now()
		go a.Run(nc, shouldRateLimit)
		res := hostile.Read(nc, cut)
		took := time.Since(opened)
		nc.Close()
		switch {
		case !res.Closed:
			t.Errorf("%s: connection %d still open after %v", addr, conns+1, took.Round(time.Millisecond))
			return
		case a != hostile.AbandonedStreams && (!res.GoAway || res.Code != http2.ErrCodeEnhanceYourCalm):
			t.Errorf("%s: connection %d closed after %v: %v; want GOAWAY ENHANCE_YOUR_CALM", addr, conns+1, took.Round(time.Millisecond), res)
			return
		}
		<-next.C
	}
}

// renegotiationRefused has openssl s_client, over TLS 1.2, ask addr to renegotiate
// (its R command) and checks that the node refuses: Go's TLS server never
// renegotiates; it answers the new ClientHello with an alert and ends the connection.
func renegotiationRefused(t *testing.T, openssl, addr, ca string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// At the lowest CPU priority, as inAttacker's: its CPU is not the node's.
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", openssl, "s_client", "-connect", addr, "-tls1_2", "-CAfile", ca, "-alpn", "h2,http/1.1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// R, once the handshake is done (s_client prints the session); stdin stays open, so
	// that s_client ends only when the node closes the connection.
	wait.For(t, 5*time.Second, func() error {
		if !strings.Contains(out.String(), "Verify return code: 0") {
			return fmt.Errorf("no handshake yet: %q", out.String())
		}
		return nil
	})
	io.WriteString(in, "R\n")
	cmd.Wait()
	in.Close()
	// Refused: s_client ends, the node having closed the connection (with an
	// unexpected_message alert; a node slower than its handshake timeout to read the
	// next byte closes it for that), instead of going on after a new handshake.
	got := out.String()
	if ctx.Err() != nil || !strings.Contains(got, "RENEGOTIATING") {
		t.Errorf("%s: openssl s_client's renegotiation was not refused with a close:\n%s", addr, got[max(0, len(got)-600):])
	}
}

// lockedBuffer is a bytes.Buffer that a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
