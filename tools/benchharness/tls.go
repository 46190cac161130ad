package benchharness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// The cost of TLS on the client ports: one redis-server serving its plain port and its
// --tls-port, one node serving --resp and --resp-tls, --http and --http-tls, each side
// measured plain and over TLS in the same group; then handshakes a second and the
// memory an idle connection holds, plain and TLS, on each server.

// tlsResult is the TLS section's figures.
type tlsResult struct {
	groups     []*groupResult
	handshakes []handshakeRow
	conns      []connMemRow
}

// handshakeRow is one TLS port's full handshakes (new sessions, no resumption).
type handshakeRow struct {
	name     string
	rate     float64       // handshakes a second
	cpu      time.Duration // server CPU a handshake
	errs     int64
	firstErr string
}

// connMemRow is the memory an idle connection holds on one port.
type connMemRow struct {
	name    string
	conns   int
	perConn float64 // bytes of server RSS a connection
	// perConnGo is a node's Go heap and stacks in use after a collection, a connection
	// (-1: not a node): its RSS barely moves for small connections, the runtime
	// reusing memory it already holds.
	perConnGo float64
}

// tlsServers are the servers the section measures.
type tlsServers struct {
	redis            *redisServer
	redisTLS         string
	node             *nodeServer
	respTLS, httpTLS string
	clientTLS        *tls.Config // trusts the servers' CA; no session cache: every handshake is a full one
}

// runTLS starts the servers, measures the section, and stops them.
func (h *harness) runTLS(ctx context.Context) (*tlsResult, error) {
	s, err := h.startTLSServers()
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(s.redis.proc, s.node.proc)
	res := &tlsResult{}
	for _, p := range h.plan.redisPipelines {
		g := &group{id: fmt.Sprintf("tls/p%d", p), title: fmt.Sprintf("client TLS, %s, %s, unpinned", pipelineLabel(p), uniform.label()),
			mode: "unpinned", pipeline: p, keys: uniform, baseline: "redis-incr", sides: s.sides(p)}
		r, err := h.runGroup(ctx, g)
		if err != nil {
			return nil, err
		}
		res.groups = append(res.groups, r)
	}
	for _, t := range []struct {
		name, addr string
		p          *proc
	}{{"redis-server --tls-port", s.redisTLS, s.redis.proc}, {"leapcount --resp-tls", s.respTLS, s.node.proc}} {
		res.handshakes = append(res.handshakes, h.measureHandshakes(ctx, t.name, t.addr, s.clientTLS, t.p))
	}
	for _, c := range []struct {
		name, addr string
		tls        *tls.Config
		p          *proc
		node       *nodeServer
	}{
		{"redis-server, plain", s.redis.addr, nil, s.redis.proc, nil}, {"redis-server, TLS", s.redisTLS, s.clientTLS, s.redis.proc, nil},
		{"leapcount RESP, plain", s.node.resp, nil, s.node.proc, s.node}, {"leapcount RESP, TLS", s.respTLS, s.clientTLS, s.node.proc, s.node},
	} {
		row, err := h.measureConnMemory(ctx, c.name, c.addr, c.tls, c.p, c.node)
		if err != nil {
			return nil, err
		}
		res.conns = append(res.conns, row)
	}
	return res, nil
}

// startTLSServers makes a CA and a server certificate, then starts a redis-server and a
// node serving plain and TLS ports.
func (h *harness) startTLSServers() (*tlsServers, error) {
	dir := filepath.Join(h.procs.dir, "tls")
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	files, pool, err := certtest.ServerFiles(dir, "bench")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &tlsServers{redisTLS: loopback(ports[0]), respTLS: loopback(ports[1]), httpTLS: loopback(ports[2]),
		clientTLS: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
	s.redis, err = h.startRedis("redis-tls", "", "--tls-port", strconv.Itoa(ports[0]), "--tls-cert-file", files.Cert,
		"--tls-key-file", files.Key, "--tls-ca-cert-file", files.CA, "--tls-auth-clients", "no")
	if err != nil {
		return nil, err
	}
	// No --tls-handshake-rate: the section measures what a handshake costs, as Redis's
	// has no such bound; the node's default would cap the handshakes row at its rate.
	nodes, err := h.startNodes("tls", 1, nodeOpts{extra: []string{"--resp-tls", s.respTLS, "--http-tls", s.httpTLS,
		"--client-tls-cert", files.Cert, "--client-tls-key", files.Key, "--tls-handshake-rate", "-1"}})
	if err != nil {
		h.procs.stopSome(s.redis.proc)
		return nil, err
	}
	s.node = nodes[0]
	return s, nil
}

// sides are INCR on Redis, SW.INCR and (unpipelined) HTTP incr on the node, each plain
// and over TLS.
func (s *tlsServers) sides(pipeline int) []*side {
	r, n := []*proc{s.redis.proc}, []*proc{s.node.proc}
	incr := lg.Command(lg.Str("INCR"), lg.Key)
	out := []*side{
		{id: "redis-incr", name: "Redis INCR", command: "INCR <key>", addr: s.redis.addr, prefix: "ti:", servers: r, request: incr},
		{id: "redis-incr-tls", name: "Redis INCR over TLS", command: "INCR <key>", addr: s.redisTLS, prefix: "tj:", servers: r,
			request: incr, tls: s.clientTLS},
		{id: "sw-incr", name: "leapcount SW.INCR", command: swIncrCommand, addr: s.node.resp, prefix: "tc:", servers: n, request: swIncr},
		{id: "sw-incr-tls", name: "leapcount SW.INCR over TLS", command: swIncrCommand, addr: s.respTLS, prefix: "td:", servers: n,
			request: swIncr, tls: s.clientTLS},
	}
	if pipeline == 1 {
		post := lg.HTTPPost("/v1/incr", `{"key":"`, `","window":"60s"}`)
		out = append(out,
			&side{id: "http-incr", name: "leapcount HTTP incr", command: `POST /v1/incr`, addr: s.node.http, proto: lg.HTTP,
				prefix: "te:", servers: n, request: post},
			&side{id: "http-incr-tls", name: "leapcount HTTP incr over TLS", command: `POST /v1/incr`, addr: s.httpTLS, proto: lg.HTTP,
				prefix: "tf:", servers: n, request: post, tls: s.clientTLS})
	}
	return out
}

// handshakeWorkers dial at once: enough to keep a server's cores busy handshaking.
const handshakeWorkers = 4

// measureHandshakes makes full TLS handshakes to addr for the measured duration, on
// handshakeWorkers connections at a time, and the server CPU they cost.
func (h *harness) measureHandshakes(ctx context.Context, name, addr string, cfg *tls.Config, p *proc) handshakeRow {
	row := handshakeRow{name: name}
	var ok, failed atomic.Int64
	var firstErr sync.Once
	// The window ends at a fixed instant, not with a context: a dial whose deadline
	// passed fails at once, before the context's timer says so.
	cpu0, start := p.CPU(), time.Now()
	end := start.Add(h.opts.Duration)
	var wg sync.WaitGroup
	for range handshakeWorkers {
		wg.Go(func() {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, Deadline: end}, Config: cfg.Clone()}
			for ctx.Err() == nil && time.Now().Before(end) {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					if time.Now().Before(end) && ctx.Err() == nil {
						failed.Add(1)
						firstErr.Do(func() { row.firstErr = err.Error() })
					}
					continue
				}
				c.Close()
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), p.CPU()-cpu0
	row.rate, row.errs = float64(ok.Load())/elapsed.Seconds(), failed.Load()
	if n := ok.Load(); n > 0 {
		row.cpu = cpu / time.Duration(n)
	}
	h.logf("  %-40s %9.0f handshakes/s  %v server CPU each  %d errors %s", name, row.rate, row.cpu, row.errs, row.firstErr)
	return row
}

// idleConns is how many idle connections the memory rows open.
const idleConns = 2000

// measureConnMemory opens idleConns connections to addr, each answered once (PING),
// and reports the server's RSS growth per connection (and a node's Go memory's).
func (h *harness) measureConnMemory(ctx context.Context, name, addr string, cfg *tls.Config, p *proc, n *nodeServer) (connMemRow, error) {
	goBefore, err := h.goMemory(n)
	if err != nil {
		return connMemRow{}, err
	}
	before := p.RSS()
	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	d := &net.Dialer{Timeout: 5 * time.Second}
	for range idleConns {
		if ctx.Err() != nil {
			return connMemRow{}, ctx.Err()
		}
		var c net.Conn
		var err error
		if cfg == nil {
			c, err = d.DialContext(ctx, "tcp", addr)
		} else {
			c, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", addr)
		}
		if err != nil {
			return connMemRow{}, fmt.Errorf("%s: %v", name, err)
		}
		conns = append(conns, c)
		if err := lg.Ping(c, 5*time.Second); err != nil {
			return connMemRow{}, fmt.Errorf("%s: %v", name, err)
		}
	}
	row := connMemRow{name: name, conns: idleConns, perConn: float64(p.RSS()-before) / idleConns, perConnGo: -1}
	if n != nil {
		goAfter, err := h.goMemory(n)
		if err != nil {
			return connMemRow{}, err
		}
		row.perConnGo = float64(goAfter-goBefore) / idleConns
	}
	h.logf("  %-40s %s RSS a connection", name, fmtBytes(row.perConn))
	return row, nil
}

// goMemory is a node's Go heap and stacks in use after a collection (0 without a node).
func (h *harness) goMemory(n *nodeServer) (int64, error) {
	if n == nil {
		return 0, nil
	}
	heap, err := h.heapAfterGC(n)
	if err != nil {
		return 0, err
	}
	met, err := h.metricsOf(n)
	if err != nil {
		return 0, err
	}
	return heap + int64(met["go_memstats_stack_inuse_bytes"]), nil
}

// freePorts returns n free loopback ports.
func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		p, err := freeport.TCPAndUDP()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
