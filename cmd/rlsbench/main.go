// Command rlsbench measures Envoy's rate limit service, ShouldRateLimit with 1 and 3
// descriptors, on envoyproxy/ratelimit with its Redis and on leapcount (one node, and a
// cluster of three with each request sent to any node), all on this machine: requests a
// second and the servers' CPU per request (every server process, Redis included), from
// one load generator. make bench-rls runs it (RATELIMIT_SRC: a checkout of
// envoyproxy/ratelimit; without it, leapcount alone).
//
//	go run ./cmd/rlsbench -node bin/node [-ratelimit bin/ratelimit] [-duration 10s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leapcount/leapcount/internal/procstat"
)

// config is plain envoyproxy/ratelimit YAML that both read; its limits are never
// reached, so every request takes the whole counting path.
const config = `domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`

func main() {
	nodeBin := flag.String("node", "bin/node", "leapcount's node binary")
	rlBin := flag.String("ratelimit", "", "envoyproxy/ratelimit's service binary (empty: leapcount alone)")
	duration := flag.Duration("duration", 10*time.Second, "measured window of each row")
	workers := flag.Int("workers", 32, "concurrent requests")
	values := flag.Int("values", 10000, "distinct values of each descriptor key")
	flag.Parse()
	if err := run(*nodeBin, *rlBin, *duration, *workers, *values); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

type target struct {
	name  string
	addrs []string // gRPC addresses, requests spread over them
	pids  []int    // the server processes whose CPU counts
}

func run(nodeBin, rlBin string, d time.Duration, workers, values int) error {
	dir, err := os.MkdirTemp("", "rlsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	start := func(env []string, name string, args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", filepath.Base(name), len(procs))))
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		procs = append(procs, cmd)
		return cmd, nil
	}
	cfgPath := filepath.Join(dir, "rl", "config", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return err
	}
	var targets []target
	if rlBin != "" {
		rport, gport := freePort(), freePort()
		redis, err := start(nil, "redis-server", "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err != nil {
			return err
		}
		rl, err := start([]string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false", "USE_STATSD=false",
			"LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:" + strconv.Itoa(rport), "HOST=127.0.0.1",
			"GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1", "PORT=" + strconv.Itoa(freePort()), "GRPC_PORT=" + strconv.Itoa(gport),
			"DEBUG_PORT=" + strconv.Itoa(freePort())}, rlBin)
		if err != nil {
			return err
		}
		targets = append(targets, target{name: "envoyproxy/ratelimit + Redis", addrs: []string{"127.0.0.1:" + strconv.Itoa(gport)},
			pids: []int{rl.Process.Pid, redis.Process.Pid}})
	}
	for _, n := range []int{1, 3} {
		t := target{name: fmt.Sprintf("leapcount, %d node%s", n, map[bool]string{true: "s"}[n > 1])}
		var join string
		for i := 0; i < n; i++ {
			gossip, grpcAddr, httpAddr := "127.0.0.1:"+strconv.Itoa(freePort()), "127.0.0.1:"+strconv.Itoa(freePort()), "127.0.0.1:"+strconv.Itoa(freePort())
			args := []string{"--name", fmt.Sprintf("b%d-%d", n, i), "--http", httpAddr, "--resp", "127.0.0.1:" + strconv.Itoa(freePort()),
				"--rpc", "127.0.0.1:" + strconv.Itoa(freePort()), "--gossip", gossip, "--grpc", grpcAddr, "--limits", cfgPath, "--log-level", "warn"}
			if join != "" {
				args = append(args, "--join", join)
			} else {
				join = gossip
			}
			p, err := start(nil, nodeBin, args...)
			if err != nil {
				return err
			}
			t.addrs, t.pids = append(t.addrs, grpcAddr), append(t.pids, p.Process.Pid)
			if err := waitReady(httpAddr, 60*time.Second); err != nil {
				return err
			}
		}
		targets = append(targets, t)
	}
	fmt.Printf("| server | descriptors | requests/s | server CPU µs per request | requests per server CPU-second |\n| --- | --- | --- | --- | --- |\n")
	for _, t := range targets {
		for _, nd := range []int{1, 3} {
			rate, cpuPer, err := measure(t, nd, d, workers, values)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			fmt.Printf("| %s | %d | %.0f | %.1f | %.0f |\n", t.name, nd, rate, cpuPer, 1e6/cpuPer)
		}
	}
	return nil
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitReady(httpAddr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r, err := http.Get("http://" + httpAddr + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %v", httpAddr, timeout)
}

// measure drives t for d (after a warm-up) and returns requests a second and server
// CPU µs per request.
func measure(t target, descriptors int, d time.Duration, workers, values int) (float64, float64, error) {
	var clients []rlspb.RateLimitServiceClient
	for _, a := range t.addrs {
		for c := 0; c < 2; c++ { // two connections per server
			conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return 0, 0, err
			}
			defer conn.Close()
			clients = append(clients, rlspb.NewRateLimitServiceClient(conn))
		}
	}
	keys := []string{"user", "path", "ip"}
	request := func(i int) *rlspb.RateLimitRequest {
		req := &rlspb.RateLimitRequest{Domain: "bench"}
		for j := 0; j < descriptors; j++ {
			req.Descriptors = append(req.Descriptors, &commonpb.RateLimitDescriptor{
				Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: keys[j], Value: "v" + strconv.Itoa(i%values)}}})
		}
		return req
	}
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, err := clients[0].ShouldRateLimit(ctx, request(0))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	drive := func(span time.Duration) (int64, error) {
		var done atomic.Int64
		var firstErr atomic.Value
		stop := time.Now().Add(span)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				cl := clients[w%len(clients)]
				for i := w; time.Now().Before(stop); i += workers {
					if _, err := cl.ShouldRateLimit(ctx, request(i)); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					done.Add(1)
				}
			}(w)
		}
		wg.Wait()
		if e, ok := firstErr.Load().(error); ok {
			return 0, e
		}
		return done.Load(), nil
	}
	if _, err := drive(2 * time.Second); err != nil { // warm-up: counters made, connections up
		return 0, 0, err
	}
	cpu0, err := cpuOf(t.pids)
	if err != nil {
		return 0, 0, err
	}
	began := time.Now()
	n, err := drive(d)
	if err != nil {
		return 0, 0, err
	}
	elapsed := time.Since(began)
	cpu1, err := cpuOf(t.pids)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, errors.New("no request answered")
	}
	return float64(n) / elapsed.Seconds(), float64((cpu1 - cpu0).Microseconds()) / float64(n), nil
}

func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		c, err := procstat.CPUTime(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", pid, err)
		}
		sum += c
	}
	return sum, nil
}
