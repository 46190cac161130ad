package rlsbench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/procstat"
)

// measure drives t for o.Duration (after o.Warmup) and returns its row.
func measure(ctx context.Context, o Options, t target, descriptors int) (Row, error) {
	row := Row{Server: t.name, Hot: o.Hot, Nodes: t.nodes, Instances: t.instances, Descriptors: descriptors, TLS: t.tls != nil}
	creds := insecure.NewCredentials()
	if t.tls != nil {
		creds = credentials.NewTLS(&tls.Config{RootCAs: t.tls, ServerName: "localhost"})
	}
	var clients []rlspb.RateLimitServiceClient
	for _, a := range t.addrs {
		for c := 0; c < 2; c++ { // two connections per server
			conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(creds))
			if err != nil {
				return row, err
			}
			defer conn.Close()
			clients = append(clients, rlspb.NewRateLimitServiceClient(conn))
		}
	}
	keys := []string{"user", "path", "ip"}
	request := func(i int) *rlspb.RateLimitRequest {
		req := &rlspb.RateLimitRequest{Domain: o.Domain}
		value := "v" + strconv.Itoa(i%o.Values)
		if o.Hot && i%5 != 0 { // four calls in five on one of ten hot values
			value = "h" + strconv.Itoa(i%10)
		}
		for j := 0; j < descriptors; j++ {
			req.Descriptors = append(req.Descriptors, &commonpb.RateLimitDescriptor{
				Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: keys[j], Value: value}}})
		}
		return req
	}
	for _, cl := range clients {
		if err := waitAnswer(ctx, cl, request(0)); err != nil {
			return row, err
		}
	}
	const callTimeout = 2 * time.Second
	drive := func(span time.Duration) (int64, error) {
		var done atomic.Int64
		var firstErr atomic.Value
		stop := time.Now().Add(span)
		var wg sync.WaitGroup
		for w := 0; w < o.Workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				cl := clients[w%len(clients)]
				for i := w; time.Now().Before(stop) && ctx.Err() == nil; i += o.Workers {
					// Each call carries a timeout, as Envoy's calls do (its filter's
					// timeout, 20 ms by default; here longer, for a shared machine).
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					_, err := cl.ShouldRateLimit(cctx, request(i))
					cancel()
					if err != nil {
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
		return done.Load(), ctx.Err()
	}
	if _, err := drive(o.Warmup); err != nil { // counters made, connections up
		return row, err
	}
	k0, err := kernelOf(t.pids)
	if err != nil {
		return row, err
	}
	stopProfiles := startProfiles(o, t, descriptors)
	began := time.Now()
	n, err := drive(o.Duration)
	elapsed := time.Since(began)
	stopProfiles()
	saveMetrics(o, t, descriptors)
	if err != nil {
		return row, err
	}
	k1, err := kernelOf(t.pids)
	if err != nil {
		return row, err
	}
	if n == 0 {
		return row, errors.New("no request answered")
	}
	row.Rate = float64(n) / elapsed.Seconds()
	row.CPUMicros = float64((k1.cpu - k0.cpu).Microseconds()) / float64(n)
	row.Syscalls = float64(k1.syscalls-k0.syscalls) / float64(n)
	row.Switches = float64(k1.switches-k0.switches) / float64(n)
	return row, nil
}

// kernel is what the server processes have used so far, summed.
type kernel struct {
	cpu                time.Duration
	syscalls, switches int64
}

func kernelOf(pids []int) (kernel, error) {
	var k kernel
	for _, pid := range pids {
		c, err := procstat.CPUTime(pid)
		if err != nil {
			return k, fmt.Errorf("pid %d: %w", pid, err)
		}
		s, err := procstat.Syscalls(pid)
		if err != nil {
			return k, fmt.Errorf("pid %d: %w", pid, err)
		}
		w, err := procstat.Switches(pid)
		if err != nil {
			return k, fmt.Errorf("pid %d: %w", pid, err)
		}
		k.cpu, k.syscalls, k.switches = k.cpu+c, k.syscalls+s, k.switches+w
	}
	return k, nil
}

// waitAnswer polls until the server answers a call (its config loaded, its ring whole).
func waitAnswer(ctx context.Context, cl rlspb.RateLimitServiceClient, req *rlspb.RateLimitRequest) error {
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, err := cl.ShouldRateLimit(ctx, req)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startProfiles asks each of t's nodes for a CPU profile of the measured window (when
// o.ProfileDir is set) and returns a func that waits for them to be written.
func startProfiles(o Options, t target, descriptors int) func() {
	if o.ProfileDir == "" || len(t.https) == 0 {
		return func() {}
	}
	var wg sync.WaitGroup
	for i, h := range t.https {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := filepath.Join(o.ProfileDir, fmt.Sprintf("n%d-d%d-node%d.pprof", len(t.https), descriptors, i))
			if err := saveProfile(h, max(int(o.Duration.Seconds()), 1), name); err != nil {
				fmt.Fprintln(o.Log, "rlsbench: profile:", err)
			}
		}()
	}
	return wg.Wait
}

// saveMetrics writes, with the profiles, each leapcount node's /metrics as the row
// ends (counters since the node started: forwards, slices lent and spent).
func saveMetrics(o Options, t target, descriptors int) {
	if o.ProfileDir == "" {
		return
	}
	for i, h := range t.https {
		name := filepath.Join(o.ProfileDir, fmt.Sprintf("n%d-d%d-node%d.metrics", len(t.https), descriptors, i))
		if err := saveURL(fmt.Sprintf("http://%s/metrics", h), name); err != nil {
			fmt.Fprintln(o.Log, "rlsbench: metrics:", err)
		}
	}
}

func saveProfile(httpAddr string, seconds int, name string) error {
	return saveURL(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", httpAddr, seconds), name)
}

func saveURL(url, name string) error {
	r, err := http.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loopback is a free loopback address.
func loopback() string { return "127.0.0.1:" + strconv.Itoa(freePort()) }

// freePort is a loopback port free for TCP and UDP (gossip binds both); the run cannot
// go on without one.
func freePort() int {
	port, err := freeport.TCPAndUDP()
	if err != nil {
		panic(err)
	}
	return port
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
