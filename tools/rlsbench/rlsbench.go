// Package rlsbench measures Envoy's rate limit service, ShouldRateLimit with 1 and 3
// descriptors, on envoyproxy/ratelimit with its Redis and on leapcount (one node, and
// clusters with each request sent to any node), all on this machine, from one load
// generator: requests a second and the servers' CPU per request (every server
// process, Redis included). tools/cmd/rlsbench (make bench-rls) and make bench's harness
// run it.
package rlsbench

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// Config is plain envoyproxy/ratelimit YAML that both servers read; its limits are
// never reached, so every request takes the whole counting path.
const Config = `domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`

// Options shape a run.
type Options struct {
	NodeBin      string        // leapcount's node binary
	NodeArgs     []string      // more flags for every node (experiments)
	Label        string        // added to leapcount's rows' server names (what NodeArgs change)
	RatelimitBin string        // envoyproxy/ratelimit's service binary (empty: leapcount alone)
	Instances    []int         // envoyproxy/ratelimit deployments measured: instances sharing one Redis (default 1 and 3)
	Sizes        []int         // leapcount cluster sizes (default 1 and 3)
	Warmup       time.Duration // per row, before its window (default 2s)
	Duration     time.Duration // per row: the measured window (default 10s)
	Workers      int           // concurrent calls (default 32)
	Values       int           // distinct values of each descriptor key (default 10000)
	Hot          bool          // a hot profile: 80% of calls on 10 values (hot descriptors), the rest spread over Values
	Domain       string        // the requests' domain (default "bench", Config's; another matches no rule and counts nothing)
	ProfileDir   string        // when set: a CPU profile of each leapcount node per row
	TLS          bool          // also measure the one-node cluster over --grpc-tls (client TLS)
	Log          io.Writer     // progress (nil: none)
}

func (o Options) withDefaults() Options {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1, 3}
	}
	if len(o.Instances) == 0 {
		o.Instances = []int{1, 3}
	}
	if o.Warmup <= 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.Values <= 0 {
		o.Values = 10000
	}
	if o.Domain == "" {
		o.Domain = "bench"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// Baseline is the server name of envoyproxy/ratelimit's rows.
const Baseline = "envoyproxy/ratelimit + Redis"

// Row is one server and descriptor count measured.
type Row struct {
	Server      string
	Hot         bool // measured with the hot profile (Options.Hot)
	Nodes       int  // leapcount's cluster size (0: the baseline)
	Instances   int  // the baseline's envoyproxy/ratelimit instances (0: leapcount)
	Descriptors int
	Rate        float64 // requests a second
	CPUMicros   float64 // server CPU µs per request, every server process
	Syscalls    float64 // read and write system calls per request, every server process
	Switches    float64 // threads switched off a CPU per request, every server process
	TLS         bool    // over --grpc-tls: set against the same node's plaintext row, not the baseline
}

// PerCPUSecond is requests per server CPU-second.
func (r Row) PerCPUSecond() float64 { return 1e6 / r.CPUMicros }

// target is one server set: where requests go and whose CPU counts.
type target struct {
	name      string
	nodes     int
	instances int
	addrs     []string       // gRPC addresses, requests spread over them
	pids      []int          // the server processes whose CPU counts
	https     []string       // leapcount's HTTP addresses (for profiles)
	tls       *x509.CertPool // when set, addrs serve TLS signed by it
	tlsAddrs  []string       // the nodes' --grpc-tls addresses (with Options.TLS) ...
	tlsPool   *x509.CertPool // ... signed by this
}

// Run starts every server, measures each row and stops them all, whatever happened.
func Run(ctx context.Context, o Options) ([]Row, error) {
	o = o.withDefaults()
	dir, err := os.MkdirTemp("", "rlsbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ps := &procs{dir: dir}
	defer ps.stopAll()
	cfgPath := filepath.Join(dir, "rl", "config", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, []byte(Config), 0o644); err != nil {
		return nil, err
	}
	var targets []target
	for _, n := range o.Instances {
		if o.RatelimitBin == "" {
			break
		}
		t, err := startRatelimit(ps, dir, o.RatelimitBin, n)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	for _, n := range o.Sizes {
		t, err := startCluster(ps, o, n, cfgPath)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
		if t.tlsPool != nil {
			targets = append(targets, target{name: t.name + ", over TLS", nodes: n, addrs: t.tlsAddrs, pids: t.pids, https: t.https, tls: t.tlsPool})
		}
	}
	var rows []Row
	for _, t := range targets {
		for _, nd := range []int{1, 3} {
			fmt.Fprintf(o.Log, "rlsbench: %s, %d descriptor(s)\n", t.name, nd)
			r, err := measure(ctx, o, t, nd)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// startRatelimit starts a redis-server and n envoyproxy/ratelimit instances on it (as
// it is scaled out: stateless instances sharing one Redis), each reading the config
// under dir/rl/config (its RUNTIME_ROOT layout).
func startRatelimit(ps *procs, dir, bin string, n int) (target, error) {
	rport := freePort()
	redis, err := ps.start(nil, "redis-server", "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return target{}, err
	}
	// envoyproxy/ratelimit exits when its first dial to Redis fails, as it can on a busy
	// machine while redis-server starts: it starts once Redis answers.
	if err := wait.Until(20*time.Second, func() error { return ping(rport) }); err != nil {
		return target{}, fmt.Errorf("redis-server for envoyproxy/ratelimit: %w", err)
	}
	t := target{name: Baseline, instances: n, pids: []int{redis.Process.Pid}}
	if n > 1 {
		t.name = fmt.Sprintf("envoyproxy/ratelimit ×%d + Redis", n)
	}
	for i := 0; i < n; i++ {
		addr, pid, err := startRatelimitInstance(ps, dir, bin, rport)
		if err != nil {
			return t, err
		}
		t.addrs, t.pids = append(t.addrs, addr), append(t.pids, pid)
	}
	return t, nil
}

// startRatelimitInstance starts one envoyproxy/ratelimit on Redis's rport and waits
// until its gRPC port listens. A port freePort chose may be taken before the service
// binds it (the service then exits), so a start that fails is tried again on others.
func startRatelimitInstance(ps *procs, dir, bin string, rport int) (addr string, pid int, err error) {
	for try := 0; try < 3; try++ {
		gport := freePort()
		rl, err2 := ps.start([]string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false", "USE_STATSD=false",
			"LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:" + strconv.Itoa(rport), "HOST=127.0.0.1",
			"GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1", "PORT=" + strconv.Itoa(freePort()), "GRPC_PORT=" + strconv.Itoa(gport),
			"DEBUG_PORT=" + strconv.Itoa(freePort())}, bin)
		if err2 != nil {
			return "", 0, err2
		}
		addr = "127.0.0.1:" + strconv.Itoa(gport)
		if err = rl.listening(addr, 20*time.Second); err == nil {
			return addr, rl.Process.Pid, nil
		}
		rl.Process.Kill()
	}
	return "", 0, fmt.Errorf("envoyproxy/ratelimit: %w", err)
}

// startCluster starts n leapcount nodes, the first one's gossip address joined by the
// others, and waits until each is ready.
func startCluster(ps *procs, o Options, n int, cfgPath string) (target, error) {
	t := target{name: fmt.Sprintf("leapcount, %d node%s%s", n, map[bool]string{true: "s"}[n > 1], o.Label), nodes: n}
	var tlsArgs []string
	if o.TLS && n == 1 {
		files, pool, err := certtest.ServerFiles(ps.dir, "rlsbench")
		if err != nil {
			return t, err
		}
		t.tlsPool, tlsArgs = pool, []string{"--client-tls-cert", files.Cert, "--client-tls-key", files.Key}
	}
	var join string
	for i := 0; i < n; i++ {
		gossip, grpcAddr, httpAddr := loopback(), loopback(), loopback()
		args := []string{"--name", fmt.Sprintf("b%d-%d", n, i), "--http", httpAddr, "--resp", loopback(),
			"--rpc", loopback(), "--gossip", gossip, "--grpc", grpcAddr, "--limits", cfgPath, "--log-level", "warn"}
		if o.ProfileDir != "" {
			args = append(args, "--pprof")
		}
		args = append(args, o.NodeArgs...)
		if tlsArgs != nil {
			tlsAddr := loopback()
			args = append(append(args, "--grpc-tls", tlsAddr), tlsArgs...)
			t.tlsAddrs = append(t.tlsAddrs, tlsAddr)
		}
		if join != "" {
			args = append(args, "--join", join)
		} else {
			join = gossip
		}
		p, err := ps.start(nil, o.NodeBin, args...)
		if err != nil {
			return t, err
		}
		t.addrs, t.pids, t.https = append(t.addrs, grpcAddr), append(t.pids, p.Process.Pid), append(t.https, httpAddr)
		if err := waitReady(httpAddr, 60*time.Second); err != nil {
			return t, err
		}
	}
	return t, nil
}

// procs are the processes a run started; stopAll kills them.
type procs struct {
	dir  string
	cmds []*proc
}

// proc is a server process started for a run.
type proc struct {
	*exec.Cmd
	log    string        // its output
	exited chan struct{} // closed once it exited
}

func (ps *procs) start(env []string, name string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{Cmd: cmd, log: filepath.Join(ps.dir, fmt.Sprintf("%s-%d.log", filepath.Base(name), len(ps.cmds))), exited: make(chan struct{})}
	log, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	ps.cmds = append(ps.cmds, p)
	return p, nil
}

func (ps *procs) stopAll() {
	for _, p := range ps.cmds {
		p.Process.Kill()
		<-p.exited
	}
}

// listening waits until p accepts connections on addr: an error if it exits first or
// timeout passes, with the end of its output.
func (p *proc) listening(addr string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it listened on %s: %s", filepath.Base(p.Path), addr, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within %v: %s", filepath.Base(p.Path), addr, timeout, p.tail())
		}
	}
}

// tail is the end of p's output.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	return string(b[max(0, len(b)-2000):])
}

// ping is nil once the redis-server on port answers PING.
func ping(port int) error {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return lg.Ping(c, time.Second)
}
