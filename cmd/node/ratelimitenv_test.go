package main

import (
	"context"
	"crypto/tls"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/xdstest"
	"github.com/leapcount/leapcount/internal/xdsconfig"
	"github.com/leapcount/leapcount/limits"
)

// envOf is an environment of exactly vars.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// flagMap is a mapping's flags by name.
func flagMap(m *rlMapping) map[string]string {
	out := map[string]string{}
	for _, f := range m.flags {
		name, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		out[name] = v
	}
	return out
}

// The mapping table: each envoyproxy/ratelimit variable (or group) and the flags it
// sets ("" : must not be set), or the one-line refusal naming it.
func TestRatelimitEnvMapping(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		flags map[string]string
		err   string
	}{
		{"defaults", nil, map[string]string{"http": "0.0.0.0:8080", "grpc": "0.0.0.0:8081",
			"limits": "/srv/runtime_data/current/config", "limits-buckets": "1", "log-level": "warn", "log-format": "text",
			"redis": "", "limits-merge": "", "rls-headers": "", "rls-denied-consumes-nothing": ""}, ""},
		{"listen addresses", map[string]string{"HOST": "127.0.0.1", "PORT": "9000", "GRPC_HOST": "::1", "GRPC_PORT": "9001"},
			map[string]string{"http": "127.0.0.1:9000", "grpc": "[::1]:9001"}, ""},
		{"runtime layout", map[string]string{"RUNTIME_ROOT": "/data/current", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_APPDIRECTORY": "rl",
			"RUNTIME_WATCH_ROOT": "false", "RUNTIME_IGNOREDOTFILES": "true"}, map[string]string{"limits": "/data/current/ratelimit/rl"}, ""},
		{"sliding windows", map[string]string{"LEAPCOUNT_SLIDING_WINDOWS": "true"}, map[string]string{"limits-buckets": ""}, ""},
		{"grpc tls", map[string]string{"GRPC_PORT": "9001", "GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/tls/crt", "GRPC_SERVER_TLS_KEY": "/tls/key"},
			map[string]string{"grpc-tls": "0.0.0.0:9001", "client-tls-cert": "/tls/crt", "client-tls-key": "/tls/key", "client-tls-ca": ""}, ""},
		{"grpc mutual tls", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k", "GRPC_CLIENT_TLS_CACERT": "/ca"},
			map[string]string{"client-tls-ca": "/ca"}, ""},
		{"grpc tls without a key", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c"}, nil,
			"GRPC_SERVER_USE_TLS=true: set GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
		{"sliding windows: bad", map[string]string{"LEAPCOUNT_SLIDING_WINDOWS": "maybe"}, nil, "LEAPCOUNT_SLIDING_WINDOWS=maybe: want true or false"},
		{"answers", map[string]string{"MERGE_DOMAIN_CONFIG": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "1", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true",
			"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true"},
			map[string]string{"limits-merge": "true", "rls-headers": "true", "rls-denied-consumes-nothing": "true"}, ""},
		{"logs", map[string]string{"LOG_LEVEL": "DEBUG", "LOG_FORMAT": "JSON"}, map[string]string{"log-level": "debug", "log-format": "json"}, ""},
		{"logs: trace", map[string]string{"LOG_LEVEL": "trace", "LOG_FORMAT": "logfmt"}, map[string]string{"log-level": "debug", "log-format": "text"}, ""},
		{"logs: bad level", map[string]string{"LOG_LEVEL": "loud"}, nil, "LOG_LEVEL=loud: want trace, debug, info, warn, error, fatal or panic"},
		{"redis tcp", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"}, map[string]string{"redis": "redis://redis:6379"}, ""},
		{"redis auth tls", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6380", "REDIS_AUTH": "app:s3:cret", "REDIS_TLS": "true"},
			map[string]string{"redis": "rediss://app:s3%3Acret@redis:6380"}, ""},
		{"redis password only", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_AUTH": "pw"},
			map[string]string{"redis": "redis://:pw@redis:6379"}, ""},
		{"redis unix", map[string]string{"REDIS_URL": "/var/run/redis.sock"}, map[string]string{"redis": "unix:///var/run/redis.sock"}, ""},
		{"redis unix given host:port", map[string]string{"REDIS_URL": "redis:6379"}, nil,
			"REDIS_URL=redis:6379: with REDIS_SOCKET_TYPE=unix (the default) it is a socket's path: set REDIS_SOCKET_TYPE=tcp for host:port"},
		{"redis pool and timeout", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_POOL_SIZE": "20", "REDIS_TIMEOUT": "2s"},
			map[string]string{"redis": "redis://r:1?dial_timeout=2s&pool_size=20&read_timeout=2s&write_timeout=2s"}, ""},
		{"redis sentinel", map[string]string{"REDIS_TYPE": "SENTINEL", "REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_AUTH": "pw", "REDIS_SENTINEL_AUTH": "spw"},
			map[string]string{"redis": "redis+sentinel://:pw@s1:26379?addr=s2%3A26379&master=mymaster&sentinel_password=spw&sentinel_username="}, ""},
		{"redis sentinel: no sentinel", map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster"}, nil,
			"REDIS_URL=mymaster: REDIS_TYPE=sentinel wants <master name>,<sentinel host:port>,..."},
		{"redis cluster", map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "c1:7000,c2:7000,c3:7000", "REDIS_TLS": "true"},
			map[string]string{"redis": "rediss+cluster://c1:7000?addr=c2%3A7000&addr=c3%3A7000"}, ""},
		{"redis: pipeline window outside a cluster", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_PIPELINE_WINDOW": "150us", "REDIS_PIPELINE_LIMIT": "8"},
			map[string]string{"redis": "redis://r:1"}, ""},
		{"redis: pipeline window in a cluster", map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "c1:7000", "REDIS_PIPELINE_WINDOW": "150us"}, nil,
			"REDIS_PIPELINE_WINDOW=150us: leapcount batches its Redis writes itself (--flush-interval); unset it"},
		{"redis: auth without url", map[string]string{"REDIS_AUTH": "pw"}, nil,
			"REDIS_AUTH=pw: REDIS_URL is not set, and leapcount then uses no Redis (counters in memory only): set REDIS_URL too, or unset it"},
		{"redis: bad type", map[string]string{"REDIS_TYPE": "ring", "REDIS_URL": "r:1"}, nil, "REDIS_TYPE=ring: want single, sentinel or cluster"},
		{"redis: tls files", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca.pem"}, nil,
			"REDIS_TLS_CACERT=/ca.pem: leapcount's Redis TLS trusts the system's roots; a CA file is not supported"},
		{"redis: tls files without tls", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_TLS_CACERT": "/ca.pem"},
			map[string]string{"redis": "redis://r:1"}, ""},
		{"memcache", map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_HOST_PORT": "m:11211"}, nil,
			"BACKEND_TYPE=memcache: leapcount keeps counters itself; only BACKEND_TYPE=redis (or unset) is accepted"},
		{"xds", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "eg:18001", "RUNTIME_ROOT": "/data"},
			map[string]string{"limits": "", "limits-buckets": "1", "grpc": "0.0.0.0:8081"}, ""},
		{"config type unknown", map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, nil, "CONFIG_TYPE=GRPC_XDS_DELTA: want FILE or GRPC_XDS_SOTW"},
		{"xds settings under FILE do nothing", map[string]string{"CONFIG_GRPC_XDS_SERVER_URL": "eg:18001", "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
			"CONFIG_GRPC_XDS_NODE_METADATA": "nonsense", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "0s", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
			"CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/missing"},
			map[string]string{"grpc": "0.0.0.0:8081", "limits": "/srv/runtime_data/current/config"}, ""},
		{"xds headers: syntax, under FILE too", map[string]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "a:1,b"}, nil,
			`CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=a:1,b: want key:value,... ("b" is not key:value)`},
		{"set to the default", map[string]string{"NEAR_LIMIT_RATIO": "0.80", "GRPC_MAX_CONNECTION_AGE": "1440m", "BACKEND_TYPE": "redis", "USE_STATSD": "false"},
			map[string]string{"grpc": "0.0.0.0:8081"}, ""},
		{"shadow mode", map[string]string{"SHADOW_MODE": "true"}, nil, "SHADOW_MODE=true: a global shadow mode is not supported: set shadow_mode: true on the rules instead"},
		{"statsd given", map[string]string{"USE_STATSD": "true"}, nil,
			"USE_STATSD=true: leapcount sends no statsd: set USE_STATSD=false, and USE_PROMETHEUS=true for metrics"},
		{"statsd host with statsd on (the default)", map[string]string{"STATSD_HOST": "statsd"}, nil,
			"STATSD_HOST=statsd: leapcount sends no statsd: set USE_STATSD=false, and USE_PROMETHEUS=true for metrics"},
		{"statsd host with statsd off", map[string]string{"STATSD_HOST": "statsd", "USE_STATSD": "false"}, map[string]string{"grpc": "0.0.0.0:8081"}, ""},
		{"stats disabled", map[string]string{"DISABLE_STATS": "true", "USE_STATSD": "true", "EXTRA_TAGS": "a:b"}, map[string]string{"grpc": "0.0.0.0:8081"}, ""},
		{"headers named", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "X-Limit"}, nil,
			"LIMIT_LIMIT_HEADER=X-Limit: leapcount's header is RateLimit-Limit, fixed"},
		{"headers named but off", map[string]string{"LIMIT_LIMIT_HEADER": "X-Limit"}, map[string]string{"rls-headers": ""}, ""},
		{"bad port", map[string]string{"PORT": "http"}, nil, "PORT=http: want a whole number"},
		{"port out of range", map[string]string{"GRPC_PORT": "70000"}, nil, "GRPC_PORT=70000: want a port from 0 to 65535"},
		{"bad duration", map[string]string{"REDIS_TIMEOUT": "10"}, nil, "REDIS_TIMEOUT=10: want a duration with its unit, such as 500ms or 10s"},
		{"uds", map[string]string{"GRPC_UDS": "/tmp/rl.sock"}, nil, "GRPC_UDS=/tmp/rl.sock: leapcount's gRPC service listens on TCP only: set GRPC_HOST and GRPC_PORT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := mapRatelimitEnv(envOf(c.env))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("got %v; want the refusal %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := flagMap(m)
			for name, want := range c.flags {
				if v, ok := got[name]; want == "" && ok || want != "" && v != want {
					t.Errorf("--%s: got %q (set: %v); want %q", name, v, ok, want)
				}
			}
		})
	}
}

// The listeners beside the node: the debug one always (as envoyproxy/ratelimit's),
// Prometheus's with USE_PROMETHEUS, not with DISABLE_STATS.
func TestRatelimitEnvListenersBeside(t *testing.T) {
	m, err := mapRatelimitEnv(envOf(map[string]string{"DEBUG_PORT": "7070", "USE_STATSD": "false", "USE_PROMETHEUS": "true",
		"PROMETHEUS_ADDR": "127.0.0.1:9191", "PROMETHEUS_PATH": "/prom"}))
	if err != nil || m.debugAddr != "0.0.0.0:7070" || m.promAddr != "127.0.0.1:9191" || m.promPath != "/prom" {
		t.Fatalf("got %+v, %v; want debug 0.0.0.0:7070 and prometheus 127.0.0.1:9191/prom", m, err)
	}
	m, err = mapRatelimitEnv(envOf(map[string]string{"USE_PROMETHEUS": "true", "DISABLE_STATS": "true"}))
	if err != nil || m.promAddr != "" {
		t.Fatalf("DISABLE_STATS: got %+v, %v; want no Prometheus listener", m, err)
	}
}

// nonDefault is a value of v's kind other than its default.
func nonDefault(v rlVar) string {
	switch v.kind {
	case kBool:
		if v.def == "true" {
			return "false"
		}
		return "true"
	case kInt:
		return "7"
	case kDuration:
		return "7s"
	case kFloat:
		return "0.7"
	case kMap:
		return "k:v"
	}
	return "x"
}

// Every variable leapcount refuses is refused by name when it has another value than
// its default (with what makes it matter set: Redis, headers, Prometheus).
func TestRatelimitEnvRefusesByName(t *testing.T) {
	enable := map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_TYPE": "cluster", "REDIS_TLS": "true",
		"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "USE_PROMETHEUS": "true",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k"}
	if _, err := mapRatelimitEnv(envOf(enable)); err != nil {
		t.Fatalf("the enabling variables alone: %v", err)
	}
	for _, r := range ratelimitRefusals {
		i := slices.IndexFunc(ratelimitVars, func(v rlVar) bool { return v.name == r.name })
		if i < 0 {
			t.Errorf("%s is refused but is no variable of envoyproxy/ratelimit's", r.name)
			continue
		}
		env := map[string]string{r.name: nonDefault(ratelimitVars[i])}
		for k, v := range enable {
			env[k] = v
		}
		_, err := mapRatelimitEnv(envOf(env))
		if want := r.name + "=" + env[r.name] + ": "; err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%s: got %v; want one line starting %q", r.name, env[r.name], err, want)
		}
	}
}

// docs/envoy.md's table names every variable envoyproxy/ratelimit reads, once, and
// the one that turns sliding windows on.
func TestRatelimitEnvDocsNameEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Switching from envoyproxy/ratelimit")
	if !ok {
		t.Fatal(`docs/envoy.md has no "## Switching from envoyproxy/ratelimit"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| ((?:`[A-Z0-9_]+`(?:, )?)+) \\|").FindAllStringSubmatch(section, -1) {
		for _, name := range regexp.MustCompile("`([A-Z0-9_]+)`").FindAllStringSubmatch(m[1], -1) {
			rows[name[1]]++
		}
	}
	seen := map[string]bool{}
	for _, v := range ratelimitVars {
		if seen[v.name] {
			t.Errorf("%s is listed twice in ratelimitVars", v.name)
		}
		seen[v.name] = true
		if rows[v.name] != 1 {
			t.Errorf("docs/envoy.md's table names %s in %d rows' first column; want 1", v.name, rows[v.name])
		}
	}
	if rows[slidingWindowsEnv] != 1 {
		t.Errorf("docs/envoy.md's table does not name %s", slidingWindowsEnv)
	}
	for name := range rows {
		if !seen[name] && name != slidingWindowsEnv {
			t.Errorf("docs/envoy.md's table names %s, which envoyproxy/ratelimit does not read", name)
		}
	}
}

// With GRPC_SERVER_USE_TLS, gRPC is served over TLS only, as envoyproxy/ratelimit serves
// it: the plaintext --grpc is off.
func TestRatelimitEnvGRPCOverTLSOnly(t *testing.T) {
	m, err := mapRatelimitEnv(envOf(map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.flags, "--grpc=") || !slices.Contains(m.flags, "--grpc-tls=0.0.0.0:8081") {
		t.Fatalf("flags %q; want --grpc= (off) and --grpc-tls=0.0.0.0:8081", m.flags)
	}
}

// With CONFIG_TYPE=GRPC_XDS_SOTW, the CONFIG_GRPC_XDS_* and XDS_CLIENT_* variables
// make the subscription (defaults as envoyproxy/ratelimit's), and a value that cannot
// be honoured is refused by name.
func TestRatelimitEnvXDSSettings(t *testing.T) {
	xds := func(more map[string]string) map[string]string {
		env := map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}
		maps.Copy(env, more)
		return env
	}
	m, err := mapRatelimitEnv(envOf(xds(nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := xdsconfig.Config{Server: "localhost:18000", NodeID: "default", NodeMetadata: map[string]string{}, Headers: map[string]string{},
		ConnectRetry: 3 * time.Second, Backoff: backoff.Policy{Initial: 10 * time.Second, Max: time.Minute, Factor: 0.5}, Jitter: true}
	if m.xds == nil || !reflect.DeepEqual(*m.xds, want) {
		t.Fatalf("defaults: got %+v; want %+v", m.xds, want)
	}
	m, err = mapRatelimitEnv(envOf(xds(map[string]string{"CONFIG_GRPC_XDS_SERVER_URL": "eg.envoy-gateway-system:18001",
		"CONFIG_GRPC_XDS_NODE_ID": "ratelimit-0", "CONFIG_GRPC_XDS_NODE_METADATA": "zone=a,team=edge=x,",
		"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "X-Auth:s3cret,x-tenant:t1", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "500ms",
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "1s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "20s", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "2",
		"XDS_CLIENT_BACKOFF_JITTER": "false", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "8388608"})))
	if err != nil {
		t.Fatal(err)
	}
	want = xdsconfig.Config{Server: "eg.envoy-gateway-system:18001", NodeID: "ratelimit-0", NodeMetadata: map[string]string{"zone": "a", "team": "edge=x"},
		Headers: map[string]string{"x-auth": "s3cret", "x-tenant": "t1"}, ConnectRetry: 500 * time.Millisecond,
		Backoff: backoff.Policy{Initial: time.Second, Max: 20 * time.Second, Factor: 2}, MaxMessageBytes: 8 << 20}
	if !reflect.DeepEqual(*m.xds, want) {
		t.Fatalf("set: got %+v; want %+v", *m.xds, want)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CONFIG_GRPC_XDS_NODE_METADATA": "zone:a"}, `CONFIG_GRPC_XDS_NODE_METADATA=zone:a: want key=value,... ("zone:a" has no '=')`},
		{map[string]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x auth:1"}, `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=x auth:1: header "x auth": a header's name is of 0-9, a-z, '-', '_' and '.'`},
		{map[string]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "user-agent:me"}, `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS=user-agent:me: header "user-agent": gRPC sets it itself`},
		{map[string]string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "0s"}, "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=0s: want a duration above 0"},
		{map[string]string{"XDS_CLIENT_BACKOFF_MAX_INTERVAL": "5s"}, "XDS_CLIENT_BACKOFF_MAX_INTERVAL=5s: want at least XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (10s)"},
		{map[string]string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "0"}, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR=0: want a number above 0 (each wait is the one before times it)"},
		{map[string]string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "-1"}, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=-1: want 0 (gRPC's 4 MiB) or more"},
		{map[string]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/c.pem"},
			"CONFIG_GRPC_XDS_CLIENT_TLS_CERT=/c.pem: set CONFIG_GRPC_XDS_CLIENT_TLS_KEY too"},
		{map[string]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/missing/ca.pem"},
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=/missing/ca.pem: open /missing/ca.pem: no such file or directory"},
	} {
		if _, err := mapRatelimitEnv(envOf(xds(c.env))); err == nil || err.Error() != c.want {
			t.Errorf("%v: got %v; want %q", c.env, err, c.want)
		}
	}
}

// CONFIG_GRPC_XDS_SERVER_USE_TLS with a client certificate, a CA and a SAN: the
// subscription reaches a server that requires a certificate of that CA, checking the
// server's certificate against the SAN (here the host dialled is 127.0.0.1, the
// certificate's name localhost); against another SAN the handshake fails. Without
// CONFIG_GRPC_XDS_SERVER_USE_TLS the files are not read.
func TestRatelimitEnvXDSTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	cli, srvFiles := ca.Issue(t, dir, "ratelimit"), ca.Issue(t, dir, "xds")
	pair, err := tls.LoadX509KeyPair(srvFiles.Cert, srvFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv := xdstest.StartTLS(t, "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	srv.Set(t, "rl", "v1", xdstest.Limit("c", "edge", "user", "", 2, rlconf.RateLimitUnit_HOUR))
	env := func(san string) map[string]string {
		return map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": srv.Addr, "CONFIG_GRPC_XDS_NODE_ID": "rl",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": cli.Cert, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": cli.Key,
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": cli.CA, "CONFIG_GRPC_XDS_SERVER_TLS_SAN": san}
	}
	m, err := mapRatelimitEnv(envOf(env("localhost")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	applied := make(chan int, 1)
	go func() {
		done <- xdsconfig.Run(ctx, *m.xds, func(files []*limits.File) error {
			select {
			case applied <- len(files):
			default:
			}
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	select {
	case n := <-applied:
		if n != 1 {
			t.Errorf("applied %d files; want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no config over mutual TLS within 10s")
	}
	m, err = mapRatelimitEnv(envOf(env("other.example")))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tls.Dial("tcp", srv.Addr, m.xds.TLS); err == nil {
		c.Close()
		t.Error("a handshake checking the SAN other.example succeeded; want it refused")
	}
	m, err = mapRatelimitEnv(envOf(map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/missing"}))
	if err != nil || m.xds.TLS != nil {
		t.Fatalf("without CONFIG_GRPC_XDS_SERVER_USE_TLS: %v, TLS %v; want plaintext, the files not read", err, m.xds.TLS)
	}
}
