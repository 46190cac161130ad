package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/internal/testkit/xdstest"
)

// `leapcount-node ratelimit` with CONFIG_TYPE=GRPC_XDS_SOTW takes its rules from
// go-control-plane's own xDS server: the first config answers (OVER_LIMIT past its
// limit), an update answers, a bad config (a unit no proto has) is NACKed with its
// error and the version in force while the rules in force keep answering, and a
// server restarted on the same port is reconnected to and its config answers.
// leapcount_rls_config_reloads_total counts each outcome.
func TestRatelimitSubcommandTakesRulesFromXDS(t *testing.T) {
	srv := xdstest.Start(t, "127.0.0.1:0")
	srv.Set(t, "rl-node", "v1", userLimit(2))
	p := startRatelimit(t, "CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL="+srv.Addr, "CONFIG_GRPC_XDS_NODE_ID=rl-node",
		"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=50ms", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=50ms", "XDS_CLIENT_BACKOFF_MAX_INTERVAL=500ms",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_STATSD=false", "LOG_LEVEL=info", "LOG_FORMAT=json",
		"LEAPCOUNT_NAME=rl1", "LEAPCOUNT_RESP=127.0.0.1:0", "LEAPCOUNT_GOSSIP=127.0.0.1:0", "LEAPCOUNT_RPC=127.0.0.1:0")
	conn, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := rlspb.NewRateLimitServiceClient(conn)

	srv.Acked(t, 20*time.Second, "v1")
	wait.For(t, 10*time.Second, func() error {
		if code, body := httpGet(t, "http://"+p.http+"/healthcheck"); code != 200 {
			return fmt.Errorf("/healthcheck: %d %q; want 200 once the first config is in force", code, body)
		}
		return nil
	})
	checkOverAfter(t, cl, 2)

	srv.Set(t, "rl-node", "v2", userLimit(1))
	srv.Acked(t, 10*time.Second, "v2")
	checkOverAfter(t, cl, 1)

	bad := userLimit(5)
	bad.Descriptors[0].RateLimit.Unit = 99
	srv.Set(t, "rl-node", "v3", bad)
	nack := srv.Nacked(t, 10*time.Second)
	if want := `descriptors[0].rate_limit.unit: invalid rate limit unit '99'`; nack.GetVersionInfo() != "v2" || !strings.Contains(nack.GetErrorDetail().GetMessage(), want) {
		t.Errorf("NACK: version %q, error %v; want v2 (in force) and %q", nack.GetVersionInfo(), nack.GetErrorDetail(), want)
	}
	checkOverAfter(t, cl, 1)

	srv.Stop()
	again := xdstest.Start(t, srv.Addr)
	again.Set(t, "rl-node", "v4", userLimit(3))
	again.Acked(t, 20*time.Second, "v4")
	checkOverAfter(t, cl, 3)

	_, body := httpGet(t, "http://"+p.http+"/metrics")
	for _, want := range []string{`leapcount_rls_config_reloads_total{result="ok"} 3`, `leapcount_rls_config_reloads_total{result="error"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// userLimit is domain edge's key user limited to n an hour.
func userLimit(n uint32) *rlconf.RateLimitConfig {
	return xdstest.Limit("edge-config", "edge", "user", "", n, rlconf.RateLimitUnit_HOUR)
}

// checkOverAfter checks that a new user is answered OK n times and then OVER_LIMIT
// (again with another user if an hour boundary fell between: the windows are fixed).
func checkOverAfter(t *testing.T, cl rlspb.RateLimitServiceClient, n int) {
	t.Helper()
	for attempt := 0; attempt < 3; attempt++ {
		hour := time.Now().Unix() / 3600
		value := fmt.Sprintf("u%d", time.Now().UnixNano())
		var got []rlspb.RateLimitResponse_Code
		for range n + 1 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := cl.ShouldRateLimit(ctx, userRequest(value))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, resp.GetOverallCode())
		}
		if time.Now().Unix()/3600 != hour {
			continue
		}
		for i, code := range got {
			want := rlspb.RateLimitResponse_OK
			if i == n {
				want = rlspb.RateLimitResponse_OVER_LIMIT
			}
			if code != want {
				t.Fatalf("answers %v; want OK %d times, then OVER_LIMIT", got, n)
			}
		}
		return
	}
	t.Fatal("three attempts each crossed an hour boundary")
}
