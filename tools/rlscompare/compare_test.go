//go:build ratelimitcompare

package rlscompare

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/internal/testkit/xdstest"
)

// config is plain envoyproxy/ratelimit YAML (no leapcount extension, so that both
// servers read the one file, or the one RateLimitConfig made of it); leapcount's
// ratelimit mode counts it in fixed windows, as envoyproxy/ratelimit does. warmup's
// limit is only for telling that a server has the config in force.
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
  - key: warmup
    rate_limit: {unit: second, requests_per_unit: 1000}
`

// xdsNode is the node ID both servers name to the xDS server.
const xdsNode = "cmp-node"

// binaries are envoyproxy/ratelimit's service and leapcount-node, named by
// LEAPCOUNT_RATELIMIT_BIN and LEAPCOUNT_NODE_BIN (make compare-ratelimit sets both).
func binaries(t *testing.T) (ratelimit, node string) {
	t.Helper()
	ratelimit, node = os.Getenv("LEAPCOUNT_RATELIMIT_BIN"), os.Getenv("LEAPCOUNT_NODE_BIN")
	if ratelimit == "" || node == "" {
		t.Fatal("LEAPCOUNT_RATELIMIT_BIN must name envoyproxy/ratelimit's binary and LEAPCOUNT_NODE_BIN leapcount-node (make compare-ratelimit)")
	}
	return ratelimit, node
}

// The same request stream, sent in lockstep to envoyproxy/ratelimit and to
// `leapcount-node ratelimit` started from one set of envoyproxy/ratelimit's
// environment variables (each with its own Redis database and listener ports), gets
// the same overall code, and per descriptor the same code, limit and remaining
// count: once with the rules of one runtime directory (CONFIG_TYPE=FILE), once with
// the rules of one xDS server (CONFIG_TYPE=GRPC_XDS_SOTW, go-control-plane's server
// serving one RateLimitConfig made of the same YAML).
func TestSameAnswersAsRatelimit(t *testing.T) {
	rlBin, nodeBin := binaries(t)
	t.Run("files", func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "rl", "config")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		env := commonEnv(t, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false")
		compare(t, start(t, "envoyproxy/ratelimit", rlBin, env), start(t, "leapcount", nodeBin, env, "ratelimit"))
	})
	t.Run("xds", func(t *testing.T) {
		srv := xdstest.Start(t, "127.0.0.1:0")
		srv.Set(t, xdsNode, "v1", configProto(t))
		env := commonEnv(t, "CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL="+srv.Addr, "CONFIG_GRPC_XDS_NODE_ID="+xdsNode)
		theirs := start(t, "envoyproxy/ratelimit", rlBin, env)
		ours := start(t, "leapcount", nodeBin, env, "ratelimit")
		compare(t, theirs, ours)
		// Both took the config from the server: two streams, each ACKing v1.
		acks := 0
		for _, r := range srv.Requests() {
			if r.GetVersionInfo() == "v1" && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil {
				acks++
			}
		}
		if acks < 2 {
			t.Errorf("the xDS server saw %d ACKs of v1; want one from each server", acks)
		}
	})
}

// commonEnv is the environment both servers start from: a Redis of the test's own
// (envoyproxy/ratelimit keeps its counts there, leapcount its write-behind), no
// statsd, and the config source extra names.
func commonEnv(t *testing.T, extra ...string) []string {
	redisSrv := testredis.Start(t)
	return append([]string{"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisSrv.Addr()}, extra...)
}

// server is one of the two, started.
type server struct {
	name string
	rls  rlspb.RateLimitServiceClient
}

// start runs bin with args and env, on listener ports of its own on loopback (HOST,
// GRPC_HOST and DEBUG_HOST with their ports; for leapcount also its RESP, gossip and
// node-to-node ports), and dials its gRPC port.
func start(t *testing.T, name, bin string, env []string, args ...string) server {
	t.Helper()
	ports := make([]string, 3)
	for i := range ports {
		p, err := freeport.TCP()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(p)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), env...), "HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"PORT="+ports[0], "GRPC_PORT="+ports[1], "DEBUG_PORT="+ports[2],
		"LEAPCOUNT_RESP=127.0.0.1:0", "LEAPCOUNT_GOSSIP=127.0.0.1:0", "LEAPCOUNT_RPC=127.0.0.1:0")
	logPath := filepath.Join(t.TempDir(), "server.log")
	log, err := os.Create(logPath)
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
		log.Close()
		if t.Failed() { // its last 40 lines (envoyproxy/ratelimit logs its stats at debug level whatever LOG_LEVEL)
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s's log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	conn, err := grpc.NewClient("127.0.0.1:"+ports[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return server{name: name, rls: rlspb.NewRateLimitServiceClient(conn)}
}

// configProto is config as a RateLimitConfig, read by protobuf's JSON reader (the
// YAML's field names are the proto's; its units are the enum's names in lower case).
func configProto(t *testing.T) *rlconf.RateLimitConfig {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil {
		t.Fatal(err)
	}
	doc["name"] = "cmp"
	var upper func(v any)
	upper = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "unit" {
					v[k] = strings.ToUpper(s)
				}
				upper(x)
			}
		case []any:
			for _, x := range v {
				upper(x)
			}
		}
	}
	upper(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := &rlconf.RateLimitConfig{}
	if err := protojson.Unmarshal(b, c); err != nil {
		t.Fatalf("config as a RateLimitConfig: %v", err)
	}
	return c
}

// compare waits until both servers have the config in force, then sends 400 random
// requests to both in lockstep and fails at the first answer that differs.
func compare(t *testing.T, theirs, ours server) {
	t.Helper()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	probe := &rlspb.RateLimitRequest{Domain: "cmp", Descriptors: []*commonpb.RateLimitDescriptor{desc("warmup", "x")}}
	for _, s := range []server{theirs, ours} {
		if err := wait.Until(30*time.Second, func() error {
			resp, err := s.rls.ShouldRateLimit(ctx, probe)
			if err != nil {
				return err
			}
			if st := resp.GetStatuses(); len(st) != 1 || st[0].GetCurrentLimit().GetRequestsPerUnit() != 1000 {
				return fmt.Errorf("answers %v: the config is not in force", resp)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s not answering from the config: %v", s.name, err)
		}
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
		want, err := theirs.rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, theirs.name, err)
		}
		got, err := ours.rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, ours.name, err)
		}
		if got.OverallCode != want.OverallCode || len(got.Statuses) != len(want.Statuses) {
			t.Fatalf("request %d %v: %s %v; %s %v", i, req, ours.name, got, theirs.name, want)
		}
		for j := range want.Statuses {
			g, w := got.Statuses[j], want.Statuses[j]
			if g.Code != w.Code || g.LimitRemaining != w.LimitRemaining || g.CurrentLimit.GetRequestsPerUnit() != w.CurrentLimit.GetRequestsPerUnit() ||
				g.CurrentLimit.GetUnit() != w.CurrentLimit.GetUnit() || g.CurrentLimit.GetName() != w.CurrentLimit.GetName() {
				t.Fatalf("request %d descriptor %d %v: %s %v; %s %v", i, j, req.Descriptors[j].Entries, ours.name, g, theirs.name, w)
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
