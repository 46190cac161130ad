//go:build ratelimitcompare

package rlscompare

import (
	"context"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// config is plain envoyproxy/ratelimit YAML (no leapcount extension, so that both
// servers read the one file); leapcount runs it with --limits-buckets 1.
const config = `domain: cmp
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: user
    value: vip
    rate_limit: {unlimited: true}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 20}
  - key: tenant
    value: t1
    descriptors:
      - key: plan
        rate_limit: {unit: minute, requests_per_unit: 12, name: plan}
  - key: tenant
    value: t2
    rate_limit: {unit: minute, requests_per_unit: 30, name: t2, replaces: [{name: plan}]}
`

func dial(t *testing.T, addr string) rlspb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

func startRatelimit(t *testing.T, bin, redisAddr string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "rl", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 3)
	for i := range ports {
		p, err := freeport.TCP()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"PORT="+strconv.Itoa(ports[0]), "GRPC_PORT="+strconv.Itoa(ports[1]), "DEBUG_PORT="+strconv.Itoa(ports[2]))
	log, err := os.Create(filepath.Join(root, "ratelimit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("envoyproxy/ratelimit's log:\n%s", b)
		}
	})
	return "127.0.0.1:" + strconv.Itoa(ports[1])
}

// The same config and the same request stream, sent to envoyproxy/ratelimit (with its
// Redis) and to leapcount (--limits-buckets 1) in lockstep, get the same overall
// code, and per descriptor the same code, limit and remaining count.
func TestSameAnswersAsRatelimit(t *testing.T) {
	bin := os.Getenv("LEAPCOUNT_RATELIMIT_BIN")
	if bin == "" {
		t.Fatal("LEAPCOUNT_RATELIMIT_BIN must name envoyproxy/ratelimit's binary (make compare-ratelimit)")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	redisSrv := testredis.Start(t)
	theirs := dial(t, startRatelimit(t, bin, redisSrv.Addr()))

	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := (&nodetest.Cluster{}).Config("node-0")
	cfg.Now = nil // the wall clock, as envoyproxy/ratelimit's
	cfg.GRPCAddr, cfg.Limits, cfg.LimitsBuckets = "127.0.0.1:0", path, 1
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	ours := dial(t, n.GRPCAddr())

	ctx := context.Background()
	probe := &rlspb.RateLimitRequest{Domain: "cmp", Descriptors: []*commonpb.RateLimitDescriptor{desc("warmup", "x")}}
	if err := wait.Until(20*time.Second, func() error {
		if _, err := theirs.ShouldRateLimit(ctx, probe); err != nil {
			return err
		}
		_, err := ours.ShouldRateLimit(ctx, probe)
		return err
	}); err != nil {
		t.Fatalf("servers not answering: %v", err)
	}

	pool := [][]string{{"user", "alice"}, {"user", "bob"}, {"user", "vip"}, {"path", "/api/a"}, {"path", "/api/b"},
		{"path", "/web"}, {"tenant", "t1", "plan", "gold"}, {"tenant", "t2"}, {"other", "z"}}
	over := 0
	for i := 0; i < 400; i++ {
		// Not within 300ms of a minute's end: the two servers read their clocks apart.
		if s := time.Now().Add(300 * time.Millisecond); s.Minute() != time.Now().Minute() {
			time.Sleep(time.Until(s.Truncate(time.Minute)) + 50*time.Millisecond)
		}
		req := &rlspb.RateLimitRequest{Domain: "cmp", HitsAddend: uint32(rng.IntN(2))}
		for k := 1 + rng.IntN(3); k > 0; k-- {
			d := desc(pool[rng.IntN(len(pool))]...)
			if rng.IntN(5) == 0 {
				d.HitsAddend = wrapperspb.UInt64(uint64(rng.IntN(4))) // 0: check only
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		want, err := theirs.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("request %d to envoyproxy/ratelimit: %v", i, err)
		}
		got, err := ours.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("request %d to leapcount: %v", i, err)
		}
		if got.OverallCode != want.OverallCode || len(got.Statuses) != len(want.Statuses) {
			t.Fatalf("request %d %v: leapcount %v; envoyproxy/ratelimit %v", i, req, got, want)
		}
		for j := range want.Statuses {
			g, w := got.Statuses[j], want.Statuses[j]
			if g.Code != w.Code || g.LimitRemaining != w.LimitRemaining || g.CurrentLimit.GetRequestsPerUnit() != w.CurrentLimit.GetRequestsPerUnit() ||
				g.CurrentLimit.GetUnit() != w.CurrentLimit.GetUnit() || g.CurrentLimit.GetName() != w.CurrentLimit.GetName() {
				t.Fatalf("request %d descriptor %d %v: leapcount %v; envoyproxy/ratelimit %v", i, j, req.Descriptors[j].Entries, g, w)
			}
		}
		if want.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT {
			over++
		}
	}
	t.Logf("400 requests, %d over the limit: the same answers", over)
	if over == 0 {
		t.Fatal("no request went over a limit: the comparison proves little")
	}
}

func desc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}
