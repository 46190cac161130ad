package xdsconfig

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/internal/testkit/xdstest"
	"github.com/leapcount/leapcount/limits"
)

const testNode = "rls-test"

// applied keeps the rules Apply put in force, as a node does.
type applied struct {
	mu    sync.Mutex
	rules *limits.Rules
	calls int
}

func (a *applied) apply(files []*limits.File) error {
	rs, err := limits.Build(files, false)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if err == nil {
		a.rules = rs
	}
	return err
}

// limit is the requests per unit of the rule for domain's key=value in force (0: none).
func (a *applied) limit(domain, key, value string) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rules == nil {
		return 0
	}
	r, _ := a.rules.Lookup(domain, []limits.Entry{{Key: key, Value: value}})
	if r == nil || len(r.Limits) == 0 {
		return 0
	}
	return r.Limits[0].RequestsPerUnit
}

func (a *applied) waitLimit(t *testing.T, want uint32) {
	t.Helper()
	wait.For(t, 10*time.Second, func() error {
		if got := a.limit("edge", "user", "alice"); got != want {
			return fmt.Errorf("edge user=alice limited to %d; want %d", got, want)
		}
		return nil
	})
}

func testConfig(server string) Config {
	return Config{Server: server, NodeID: testNode, NodeMetadata: map[string]string{"cluster": "edge"},
		Headers: map[string]string{"x-auth": "s3cret"}, ConnectRetry: 50 * time.Millisecond,
		Backoff: backoff.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}, Jitter: true}
}

// run runs the client until the test ends, and checks that Run returns then.
func run(t *testing.T, cfg Config, apply Apply) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, apply) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of its context's end")
		}
	})
}

// startedAtV1 is a server whose snapshot v1 limits user to n, and a client (until
// the test ends) that has put v1 in force and ACKed it.
func startedAtV1(t *testing.T, n uint32) (*xdstest.Server, *applied) {
	t.Helper()
	srv := xdstest.Start(t, "127.0.0.1:0")
	srv.Set(t, testNode, "v1", user(n))
	a := &applied{}
	run(t, testConfig(srv.Addr), a.apply)
	a.waitLimit(t, n)
	srv.Acked(t, 10*time.Second, "v1")
	return srv, a
}

func user(n uint32) *rlconf.RateLimitConfig {
	return xdstest.Limit("edge-config", "edge", "user", "", n, rlconf.RateLimitUnit_MINUTE)
}

// The first config applies, and its ACK names its version and nonce; the first
// request names the node (ID and metadata) and the stream carries the headers; an
// update applies; a config that does not read (an unknown unit) or does not build (a
// descriptor twice) is NACKed with its error, the version in force and its own nonce,
// and the rules in force stay.
func TestConfigUpdatesApplyAndBadOnesAreNacked(t *testing.T) {
	srv, a := startedAtV1(t, 5)
	first := srv.Requests()[0]
	if first.GetNode().GetId() != testNode || first.GetNode().GetMetadata().GetFields()["cluster"].GetStringValue() != "edge" ||
		first.GetTypeUrl() != TypeURL || first.GetVersionInfo() != "" || len(first.GetResourceNames()) != 0 {
		t.Errorf("first request %v; want node %s with metadata cluster=edge, every %s, no version", first, testNode, TypeURL)
	}
	if h := srv.Headers(); len(h) == 0 || strings.Join(h[0].Get("x-auth"), ",") != "s3cret" {
		t.Errorf("stream headers %v; want x-auth: s3cret", h)
	}

	srv.Set(t, testNode, "v2", user(7))
	a.waitLimit(t, 7)
	srv.Acked(t, 10*time.Second, "v2")

	bad := user(3)
	bad.Descriptors[0].RateLimit.Unit = 99
	dup := user(3)
	dup.Descriptors = append(dup.Descriptors, dup.Descriptors[0])
	for i, c := range []struct {
		cfg  *rlconf.RateLimitConfig
		want string
	}{
		{bad, `RateLimitConfig "edge-config": descriptors[0].rate_limit.unit: invalid rate limit unit '99'`},
		{dup, `RateLimitConfig "edge-config": descriptors[1].key: duplicate descriptor composite key 'edge.user'`},
	} {
		version := fmt.Sprintf("bad%d", i)
		srv.Set(t, testNode, version, c.cfg)
		var nonce string
		wait.For(t, 10*time.Second, func() error {
			for _, r := range srv.Responses() {
				if r.GetVersionInfo() == version {
					nonce = r.GetNonce()
					return nil
				}
			}
			return fmt.Errorf("version %s not sent yet", version)
		})
		nack := srv.WaitFor(t, 10*time.Second, "NACK of "+version, func(r *discoverypb.DiscoveryRequest) bool { return r.GetResponseNonce() == nonce })
		if nack.GetVersionInfo() != "v2" || nack.GetErrorDetail().GetMessage() != c.want {
			t.Errorf("answer to %s: version %q, error %v; want a NACK of v2 (in force) with %q", version, nack.GetVersionInfo(), nack.GetErrorDetail(), c.want)
		}
		if got := a.limit("edge", "user", "alice"); got != 7 {
			t.Errorf("after %s was NACKed: limited to %d; want v2's 7 still", version, got)
		}
	}
}

// A refused config that the server sends again at once (go-control-plane's snapshot
// cache answers a NACK so) is refused again after the backoff's wait, not at once:
// the two do not spin. It is reported to Reloaded once.
func TestARefusedConfigSentAgainIsRefusedAfterAWait(t *testing.T) {
	srv := xdstest.Start(t, "127.0.0.1:0")
	bad := user(3)
	bad.Descriptors[0].RateLimit.Unit = 99
	srv.Set(t, testNode, "bad", bad)
	cfg := testConfig(srv.Addr)
	cfg.Backoff, cfg.Jitter = backoff.Policy{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}, false
	var refusals atomic.Int32
	cfg.Reloaded = func(err error) {
		if err != nil {
			refusals.Add(1)
		}
	}
	var a applied
	run(t, cfg, a.apply)
	var nacks []time.Time
	wait.For(t, 10*time.Second, func() error {
		nacks = nacks[:0]
		times := srv.RequestTimes()
		for i, r := range srv.Requests() {
			if r.GetErrorDetail() != nil {
				nacks = append(nacks, times[i])
			}
		}
		if len(nacks) < 4 {
			return fmt.Errorf("%d NACKs; want 4", len(nacks))
		}
		return nil
	})
	for i := 1; i < len(nacks); i++ {
		if gap := nacks[i].Sub(nacks[i-1]); gap < 90*time.Millisecond {
			t.Errorf("NACK %d came %v after the one before; want the backoff's 100ms", i+1, gap)
		}
	}
	if n := refusals.Load(); n != 1 {
		t.Errorf("Reloaded told of %d refusals; want 1 (the same config sent again is no new one)", n)
	}
	srv.Set(t, testNode, "good", user(6))
	a.waitLimit(t, 6)
}

// When the server goes away the client opens a stream again, after its backoff,
// once a server answers on the same address: its first request names the version in
// force, and the new server's config applies.
func TestReconnectsWhenTheServerComesBack(t *testing.T) {
	srv, a := startedAtV1(t, 5)

	srv.Stop()
	again := xdstest.Start(t, srv.Addr)
	again.Set(t, testNode, "v2", user(9))
	a.waitLimit(t, 9)
	first := again.Requests()[0]
	if first.GetVersionInfo() != "v1" || first.GetNode().GetId() != testNode {
		t.Errorf("first request to the new server: %v; want version v1 (in force) and node %s", first, testNode)
	}
}

// While the server cannot be reached (here: its port accepts connections and closes
// them at once), the client keeps trying, every ConnectRetry; the config applies once
// the server answers there.
func TestKeepsTryingAServerThatCannotBeReached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	var a applied
	run(t, testConfig(ln.Addr().String()), a.apply)
	wait.For(t, 10*time.Second, func() error {
		if n := accepted.Load(); n < 3 {
			return fmt.Errorf("%d connection attempts; want 3", n)
		}
		return nil
	})
	ln.Close()
	srv := xdstest.Start(t, ln.Addr().String())
	srv.Set(t, testNode, "v1", user(4))
	a.waitLimit(t, 4)
}

// Run returns once its context ends, whether connected or still waiting for a
// server, and leaves no goroutine of its own or of its gRPC connection behind.
func TestRunLeavesNothingRunning(t *testing.T) {
	srv := xdstest.Start(t, "127.0.0.1:0")
	srv.Set(t, testNode, "v1", user(5))
	refused, free, err := freeport.Refused()
	if err != nil {
		t.Fatal(err)
	}
	defer free()
	for _, server := range []string{srv.Addr, refused} {
		var a applied
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, testConfig(server), a.apply) }()
		if server == srv.Addr {
			a.waitLimit(t, 5)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Run did not return within 10s of its context's end", server)
		}
	}
	srv.Stop() // the server's goroutines are gRPC's too
	wait.For(t, 10*time.Second, func() error {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "internal/xdsconfig.") && !strings.Contains(g, "TestRunLeavesNothingRunning") ||
				strings.Contains(g, "google.golang.org/grpc") {
				return fmt.Errorf("a goroutine is left:\n%s", g)
			}
		}
		return nil
	})
}

// Each wait before a stream lies between Initial and the larger of the backoff's
// wait and 1.5×Initial, at most Max, and varies; without jitter it is the backoff's.
func TestJitteredWaitsStayInBounds(t *testing.T) {
	c := &client{cfg: Config{Backoff: backoff.Policy{Initial: 100 * time.Millisecond, Max: time.Second, Factor: 0.5}, Jitter: true}.withDefaults()}
	for _, d := range []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		hi := max(d, 150*time.Millisecond)
		seen := map[time.Duration]bool{}
		for range 200 {
			w := c.jittered(d)
			if w < 100*time.Millisecond || w > hi {
				t.Fatalf("after the backoff's %v: waited %v; want %v to %v", d, w, 100*time.Millisecond, hi)
			}
			seen[w] = true
		}
		if len(seen) < 10 {
			t.Errorf("after the backoff's %v: %d distinct waits in 200; want them spread", d, len(seen))
		}
	}
	c.cfg.Jitter = false
	if w := c.jittered(400 * time.Millisecond); w != 400*time.Millisecond {
		t.Errorf("without jitter: waited %v; want the backoff's 400ms", w)
	}
}
