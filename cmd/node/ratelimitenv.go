package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leapcount/leapcount/internal/xdsconfig"
)

// `leapcount-node ratelimit` runs a node configured by envoyproxy/ratelimit's
// environment variables (its src/settings/settings.go), so that its users switch by
// changing the image. Each variable is honoured, by setting the node's flags, or, set
// to a value leapcount does not honour, refused at start by name (exit 2). The table
// in docs/envoy.md ("Switching from envoyproxy/ratelimit") says what each one does.

// varKind is how envoyproxy/ratelimit reads a variable (envconfig): its syntax, and
// how a value compares with the default.
type varKind int

const (
	kString varKind = iota
	kBool
	kInt
	kDuration
	kFloat
	kMap // key:value,...
)

// rlVar is one variable envoyproxy/ratelimit reads, with its default.
type rlVar struct {
	name, def string
	kind      varKind
}

// ratelimitVars is every variable of envoyproxy/ratelimit's settings, in its order.
var ratelimitVars = []rlVar{
	{"HOST", "0.0.0.0", kString}, {"PORT", "8080", kInt},
	{"DEBUG_HOST", "0.0.0.0", kString}, {"DEBUG_PORT", "6070", kInt},
	{"GRPC_UDS", "", kString}, {"GRPC_HOST", "0.0.0.0", kString}, {"GRPC_PORT", "8081", kInt},
	{"GRPC_MAX_CONNECTION_AGE", "24h", kDuration}, {"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", kDuration},
	{"GRPC_SERVER_USE_TLS", "false", kBool}, {"GRPC_SERVER_TLS_CERT", "", kString}, {"GRPC_SERVER_TLS_KEY", "", kString},
	{"GRPC_CLIENT_TLS_CACERT", "", kString}, {"GRPC_CLIENT_TLS_SAN", "", kString},
	{"LOG_LEVEL", "WARN", kString}, {"LOG_FORMAT", "text", kString},
	{"CONFIG_TYPE", "FILE", kString}, {"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", kBool},
	{"CONFIG_GRPC_XDS_NODE_ID", "default", kString}, {"CONFIG_GRPC_XDS_NODE_METADATA", "", kString},
	{"CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000", kString}, {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s", kDuration},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", kMap}, {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", kBool},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", kString}, {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", kString},
	{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "", kString}, {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", kString},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s", kDuration}, {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", kDuration},
	{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", kFloat}, {"XDS_CLIENT_BACKOFF_JITTER", "true", kBool},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", kInt},
	{"USE_DOG_STATSD", "false", kBool}, {"USE_DOG_STATSD_MOGRIFIERS", "", kString}, {"USE_STATSD", "true", kBool},
	{"STATSD_HOST", "localhost", kString}, {"STATSD_PORT", "8125", kInt}, {"EXTRA_TAGS", "", kString},
	{"STATS_FLUSH_INTERVAL", "10s", kDuration}, {"DISABLE_STATS", "false", kBool},
	{"USE_PROMETHEUS", "false", kBool}, {"PROMETHEUS_ADDR", ":9090", kString}, {"PROMETHEUS_PATH", "/metrics", kString},
	{"PROMETHEUS_MAPPER_YAML", "", kString}, {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false", kBool},
	{"RUNTIME_ROOT", "/srv/runtime_data/current", kString}, {"RUNTIME_SUBDIRECTORY", "", kString},
	{"RUNTIME_APPDIRECTORY", "config", kString}, {"RUNTIME_IGNOREDOTFILES", "false", kBool}, {"RUNTIME_WATCH_ROOT", "true", kBool},
	{"EXPIRATION_JITTER_MAX_SECONDS", "300", kInt}, {"LOCAL_CACHE_SIZE_IN_BYTES", "0", kInt},
	{"NEAR_LIMIT_RATIO", "0.8", kFloat}, {"CACHE_KEY_PREFIX", "", kString}, {"BACKEND_TYPE", "redis", kString},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", kBool},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "false", kBool}, {"LIMIT_LIMIT_HEADER", "RateLimit-Limit", kString},
	{"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", kString}, {"LIMIT_RESET_HEADER", "RateLimit-Reset", kString},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", kBool},
	{"REDIS_SOCKET_TYPE", "unix", kString}, {"REDIS_TYPE", "SINGLE", kString},
	{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock", kString}, {"REDIS_POOL_SIZE", "10", kInt},
	{"REDIS_AUTH", "", kString}, {"REDIS_TLS", "false", kBool},
	{"REDIS_TLS_CLIENT_CERT", "", kString}, {"REDIS_TLS_CLIENT_KEY", "", kString}, {"REDIS_TLS_CACERT", "", kString},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", kBool},
	{"REDIS_PIPELINE_WINDOW", "0", kDuration}, {"REDIS_PIPELINE_LIMIT", "0", kInt},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "1", kInt},
	{"REDIS_PERSECOND", "false", kBool}, {"REDIS_PERSECOND_SOCKET_TYPE", "unix", kString},
	{"REDIS_PERSECOND_TYPE", "SINGLE", kString}, {"REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", kString},
	{"REDIS_PERSECOND_POOL_SIZE", "10", kInt}, {"REDIS_PERSECOND_AUTH", "", kString}, {"REDIS_PERSECOND_TLS", "false", kBool},
	{"REDIS_SENTINEL_AUTH", "", kString}, {"REDIS_PERSECOND_SENTINEL_AUTH", "", kString},
	{"REDIS_PERSECOND_PIPELINE_WINDOW", "0", kDuration}, {"REDIS_PERSECOND_PIPELINE_LIMIT", "0", kInt},
	{"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "1", kInt},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", kBool},
	{"REDIS_TIMEOUT", "10s", kDuration}, {"REDIS_PERSECOND_TIMEOUT", "10s", kDuration},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", kString}, {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", kString},
	{"REDIS_STARTUP_INITIAL_INTERVAL", "1s", kDuration}, {"REDIS_STARTUP_MAX_INTERVAL", "30s", kDuration},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", "0", kDuration},
	{"MEMCACHE_HOST_PORT", "", kString}, {"MEMCACHE_MAX_IDLE_CONNS", "2", kInt}, {"MEMCACHE_SRV", "", kString},
	{"MEMCACHE_SRV_REFRESH", "0", kDuration}, {"MEMCACHE_TLS", "false", kBool},
	{"MEMCACHE_TLS_CLIENT_CERT", "", kString}, {"MEMCACHE_TLS_CLIENT_KEY", "", kString}, {"MEMCACHE_TLS_CACERT", "", kString},
	{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", kBool},
	{"SHADOW_MODE", "false", kBool}, {"QUOTA_MODE", "false", kBool}, {"RESPONSE_DYNAMIC_METADATA", "false", kBool},
	{"MERGE_DOMAIN_CONFIG", "false", kBool},
	{"TRACING_ENABLED", "false", kBool}, {"TRACING_SERVICE_NAME", "RateLimit", kString},
	{"TRACING_SERVICE_NAMESPACE", "", kString}, {"TRACING_SERVICE_INSTANCE_ID", "", kString},
	{"TRACING_EXPORTER_PROTOCOL", "http", kString}, {"TRACING_SAMPLING_RATE", "1", kFloat},
}

// slidingWindowsEnv turns on sliding windows in this mode (fixed, epoch-aligned
// windows otherwise, as envoyproxy/ratelimit's).
const slidingWindowsEnv = "LEAPCOUNT_SLIDING_WINDOWS"

// rlEnv is the variables as envoyproxy/ratelimit would read them: each one's value, or
// its default when unset or empty.
type rlEnv struct {
	vals map[string]string
	set  map[string]bool
	kind map[string]varKind
	defs map[string]string
}

// readRatelimitEnv reads every variable and checks its syntax, as envconfig does.
func readRatelimitEnv(env func(string) (string, bool)) (*rlEnv, error) {
	e := &rlEnv{vals: map[string]string{}, set: map[string]bool{}, kind: map[string]varKind{}, defs: map[string]string{}}
	for _, v := range ratelimitVars {
		e.vals[v.name], e.kind[v.name], e.defs[v.name] = v.def, v.kind, v.def
		s, ok := env(v.name)
		if !ok || s == "" {
			continue
		}
		if err := checkKind(v.kind, s); err != nil {
			return nil, fmt.Errorf("%s=%s: %v", v.name, s, err)
		}
		e.vals[v.name], e.set[v.name] = s, true
	}
	return e, nil
}

// checkKind checks that s reads as kind.
func checkKind(kind varKind, s string) error {
	var err error
	switch kind {
	case kBool:
		if _, err = strconv.ParseBool(s); err != nil {
			return fmt.Errorf("want true or false")
		}
	case kInt:
		if _, err = strconv.Atoi(s); err != nil {
			return fmt.Errorf("want a whole number")
		}
	case kDuration:
		if _, err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("want a duration with its unit, such as 500ms or 10s")
		}
	case kFloat:
		if _, err = strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("want a number")
		}
	case kMap:
		return checkMapItems(s)
	}
	return nil
}

func (e *rlEnv) str(name string) string { return e.vals[name] }

func (e *rlEnv) on(name string) bool {
	b, _ := strconv.ParseBool(e.vals[name])
	return b
}

// isDefault reports whether name reads as its default (unset, or set to it).
func (e *rlEnv) isDefault(name string) bool {
	return sameValue(e.kind[name], e.vals[name], e.defs[name])
}

func sameValue(kind varKind, a, b string) bool {
	switch kind {
	case kBool:
		x, _ := strconv.ParseBool(a)
		y, _ := strconv.ParseBool(b)
		return x == y
	case kInt, kFloat:
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		return x == y
	case kDuration:
		if b == "" || b == "0" {
			b = "0s"
		}
		x, _ := time.ParseDuration(a)
		y, _ := time.ParseDuration(b)
		return x == y
	}
	return a == b
}

// rlMapping is what the variables make of a node: its flags, and the listeners
// envoyproxy/ratelimit serves beside its own (debug, Prometheus).
type rlMapping struct {
	flags              []string          // --name=value
	debugAddr          string            // "": none
	promAddr, promPath string            // "": none
	xds                *xdsconfig.Config // CONFIG_TYPE=GRPC_XDS_SOTW: the rules' source (nil: RUNTIME_ROOT's files)
	notes              []string          // variables taken and not read, each with why: said once at start
}

func (m *rlMapping) flag(name, value string) { m.flags = append(m.flags, "--"+name+"="+value) }

// has reports whether the variables set the flag name.
func (m *rlMapping) has(name string) bool {
	return slices.ContainsFunc(m.flags, func(f string) bool { return strings.HasPrefix(f, "--"+name+"=") })
}

// rlStep maps a group of variables, or refuses one.
type rlStep func(e *rlEnv, m *rlMapping, env func(string) (string, bool)) error

// mapRatelimitEnv maps envoyproxy/ratelimit's variables (and LEAPCOUNT_SLIDING_WINDOWS)
// to the node's flags, or names the first it refuses.
func mapRatelimitEnv(env func(string) (string, bool)) (*rlMapping, error) {
	e, err := readRatelimitEnv(env)
	if err != nil {
		return nil, err
	}
	m := &rlMapping{}
	for _, step := range []rlStep{refuseUnsupported, noteUnread, mapListeners, mapRuntime, mapRedis, mapBehaviour, mapLogs, mapStats} {
		if err := step(e, m, env); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// rlRefusal is a variable leapcount refuses unless it has its default (or it would have
// no effect: when is false).
type rlRefusal struct {
	name, why string
	when      func(e *rlEnv) bool // nil: always
}

// ratelimitRefusals are the variables leapcount does not honour, and why.
var ratelimitRefusals = []rlRefusal{
	{"BACKEND_TYPE", "leapcount keeps counters itself; only BACKEND_TYPE=redis (or unset) is accepted", nil},
	{"GRPC_UDS", "leapcount's gRPC service listens on TCP only: set GRPC_HOST and GRPC_PORT", nil},
	{"GRPC_CLIENT_TLS_SAN", "leapcount checks that a client's certificate chains to GRPC_CLIENT_TLS_CACERT, not its SAN", grpcTLS},
	{"GRPC_MAX_CONNECTION_AGE", "leapcount's gRPC connections have no maximum age (an idle one closes after 5 min); unset it", nil},
	{"GRPC_MAX_CONNECTION_AGE_GRACE", "leapcount's gRPC connections have no maximum age; unset it", nil},
	{"SHADOW_MODE", "a global shadow mode is not supported: set shadow_mode: true on the rules instead", nil},
	{"QUOTA_MODE", "a global quota mode is not supported: set quota_mode: true on the rules instead", nil},
	{"RESPONSE_DYNAMIC_METADATA", "leapcount sets no dynamic metadata on its answers", nil},
	{"NEAR_LIMIT_RATIO", "leapcount's near_limit metric counts above 80% of a limit, fixed", nil},
	{"LOCAL_CACHE_SIZE_IN_BYTES", "leapcount keeps every counter in memory already; unset it", nil},
	{"CACHE_KEY_PREFIX", "leapcount names its Redis keys itself (rls:<domain>:...) and takes no prefix", nil},
	{"EXPIRATION_JITTER_MAX_SECONDS", "leapcount's Redis keys expire as their windows end, with no jitter; unset it", nil},
	{"TRACING_ENABLED", "leapcount exports no traces", nil},
	{"REDIS_PERSECOND", "leapcount keeps per-second limits with the others; one REDIS_URL is all it uses", nil},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "leapcount decides from memory while Redis is down, and its health does not follow Redis", nil},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "leapcount's Redis pool waits for a connection; unset it", nil},
	{"REDIS_STARTUP_INITIAL_INTERVAL", "leapcount starts without Redis and connects when it answers; unset it", nil},
	{"REDIS_STARTUP_MAX_INTERVAL", "leapcount starts without Redis and connects when it answers; unset it", nil},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", "leapcount starts without Redis and never gives up on it; unset it", nil},
	{"REDIS_PIPELINE_WINDOW", "leapcount batches its Redis writes itself (--flush-interval); unset it", redisCluster},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "leapcount batches its Redis writes itself (--flush-interval); unset it", redisCluster},
	{"REDIS_TLS_CACERT", "leapcount's Redis TLS trusts the system's roots; a CA file is not supported", redisTLS},
	{"REDIS_TLS_CLIENT_CERT", "leapcount's Redis TLS sends no client certificate", redisTLS},
	{"REDIS_TLS_CLIENT_KEY", "leapcount's Redis TLS sends no client certificate", redisTLS},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "leapcount's Redis TLS always verifies the host name", redisTLS},
	{"LIMIT_LIMIT_HEADER", "leapcount's header is RateLimit-Limit, fixed", headersOn},
	{"LIMIT_REMAINING_HEADER", "leapcount's header is RateLimit-Remaining, fixed", headersOn},
	{"LIMIT_RESET_HEADER", "leapcount's header is RateLimit-Reset, fixed", headersOn},
	{"USE_DOG_STATSD", "leapcount sends no DogStatsD: its metrics are Prometheus's (USE_PROMETHEUS)", statsOn},
	{"STATSD_HOST", "leapcount sends no statsd: set USE_STATSD=false, and USE_PROMETHEUS=true for metrics", statsdOn},
	{"STATSD_PORT", "leapcount sends no statsd: set USE_STATSD=false, and USE_PROMETHEUS=true for metrics", statsdOn},
	{"EXTRA_TAGS", "leapcount's metric labels are fixed", statsOn},
	{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "leapcount's durations are in seconds, as Prometheus names them", promOn},
}

func redisCluster(e *rlEnv) bool {
	return e.set["REDIS_URL"] && strings.EqualFold(e.str("REDIS_TYPE"), "cluster")
}
func redisTLS(e *rlEnv) bool  { return e.set["REDIS_URL"] && e.on("REDIS_TLS") }
func headersOn(e *rlEnv) bool { return e.on("LIMIT_RESPONSE_HEADERS_ENABLED") }
func statsOn(e *rlEnv) bool   { return !e.on("DISABLE_STATS") }
func statsdOn(e *rlEnv) bool  { return statsOn(e) && (e.on("USE_STATSD") || e.on("USE_DOG_STATSD")) }
func promOn(e *rlEnv) bool    { return statsOn(e) && e.on("USE_PROMETHEUS") }

// ratelimitUnread are variables taken without effect, where refusing them would stop a
// deployment that sets them for what leapcount does anyway in its own way: each set one
// is said once at start (rlMapping.notes), never silently ignored.
var ratelimitUnread = []struct {
	name, why string
	when      func(*rlEnv) bool
}{
	// Envoy Gateway sets it on every rate limit Deployment it makes: the metrics are
	// served all the same, under leapcount's names.
	{"PROMETHEUS_MAPPER_YAML", "not read: leapcount's metrics have their own names (docs/operations.md), served at PROMETHEUS_ADDR all the same", promOn},
}

// noteUnread notes each variable of ratelimitUnread set where it would have an effect.
func noteUnread(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	for _, u := range ratelimitUnread {
		if !e.isDefault(u.name) && (u.when == nil || u.when(e)) {
			m.notes = append(m.notes, fmt.Sprintf("%s=%s: %s", u.name, e.str(u.name), u.why))
		}
	}
	return nil
}

// refuseUnsupported names the first variable of ratelimitRefusals set to another value
// than its default where it has an effect, and USE_STATSD=true given explicitly.
func refuseUnsupported(e *rlEnv, _ *rlMapping, _ func(string) (string, bool)) error {
	for _, r := range ratelimitRefusals {
		if !e.isDefault(r.name) && (r.when == nil || r.when(e)) {
			return fmt.Errorf("%s=%s: %s", r.name, e.str(r.name), r.why)
		}
	}
	if e.set["USE_STATSD"] && e.on("USE_STATSD") && statsOn(e) {
		return fmt.Errorf("USE_STATSD=%s: leapcount sends no statsd: set USE_STATSD=false, and USE_PROMETHEUS=true for metrics", e.str("USE_STATSD"))
	}
	return nil
}

// mapListeners: HOST/PORT is the HTTP address (the API, /json and /healthcheck),
// GRPC_HOST/GRPC_PORT the gRPC one, DEBUG_HOST/DEBUG_PORT the debug listener's.
func mapListeners(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	addrs := []struct{ host, port string }{{"HOST", "PORT"}, {"GRPC_HOST", "GRPC_PORT"}, {"DEBUG_HOST", "DEBUG_PORT"}}
	var out [3]string
	for i, a := range addrs {
		port, _ := strconv.Atoi(e.str(a.port))
		if port < 0 || port > 65535 {
			return fmt.Errorf("%s=%d: want a port from 0 to 65535", a.port, port)
		}
		out[i] = net.JoinHostPort(e.str(a.host), strconv.Itoa(port))
	}
	m.flag("http", out[0])
	m.debugAddr = out[2]
	if !grpcTLS(e) {
		m.flag("grpc", out[1])
		return nil
	}
	return mapGRPCTLS(e, m, out[1])
}

// grpcTLS reports whether envoyproxy/ratelimit's gRPC server would speak TLS.
func grpcTLS(e *rlEnv) bool { return e.on("GRPC_SERVER_USE_TLS") }

// mapGRPCTLS serves gRPC over TLS only, on addr, with the certificate and key given,
// and with GRPC_CLIENT_TLS_CACERT, mutual TLS (envoyproxy/ratelimit's
// GRPC_SERVER_USE_TLS settings).
func mapGRPCTLS(e *rlEnv, m *rlMapping, addr string) error {
	cert, key := e.str("GRPC_SERVER_TLS_CERT"), e.str("GRPC_SERVER_TLS_KEY")
	if cert == "" || key == "" {
		return errors.New("GRPC_SERVER_USE_TLS=true: set GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
	}
	m.flag("grpc", "")
	m.flag("grpc-tls", addr)
	m.flag("client-tls-cert", cert)
	m.flag("client-tls-key", key)
	if ca := e.str("GRPC_CLIENT_TLS_CACERT"); ca != "" {
		m.flag("client-tls-ca", ca)
	}
	return nil
}

// mapRuntime: with CONFIG_TYPE=FILE the config files are
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (whether RUNTIME_WATCH_ROOT
// watches the root or the directory, the files read are those), read again when they
// change; leapcount skips dot files (RUNTIME_IGNOREDOTFILES=true). With
// GRPC_XDS_SOTW the rules come from xDS (xdsSettings). Windows are fixed unless
// LEAPCOUNT_SLIDING_WINDOWS.
func mapRuntime(e *rlEnv, m *rlMapping, env func(string) (string, bool)) error {
	switch ct := e.str("CONFIG_TYPE"); ct {
	case "FILE":
		m.flag("limits", filepath.Join(e.str("RUNTIME_ROOT"), e.str("RUNTIME_SUBDIRECTORY"), e.str("RUNTIME_APPDIRECTORY")))
	case "GRPC_XDS_SOTW":
		x, err := xdsSettings(e)
		if err != nil {
			return err
		}
		m.xds = x
	default:
		return fmt.Errorf("CONFIG_TYPE=%s: want FILE or GRPC_XDS_SOTW", ct)
	}
	sliding := false
	if s, ok := env(slidingWindowsEnv); ok && s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s=%s: want true or false", slidingWindowsEnv, s)
		}
		sliding = b
	}
	if !sliding {
		m.flag("limits-buckets", "1")
	}
	return nil
}

// mapBehaviour: the settings that shape answers.
func mapBehaviour(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	for _, b := range []struct{ name, flag string }{
		{"MERGE_DOMAIN_CONFIG", "limits-merge"},
		{"LIMIT_RESPONSE_HEADERS_ENABLED", "rls-headers"},
		{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "rls-denied-consumes-nothing"},
	} {
		if e.on(b.name) {
			m.flag(b.flag, "true")
		}
	}
	return nil
}

// logrusLevels are LOG_LEVEL's values (logrus.ParseLevel), as --log-level's.
var logrusLevels = map[string]string{"panic": "error", "fatal": "error", "error": "error",
	"warn": "warn", "warning": "warn", "info": "info", "debug": "debug", "trace": "debug"}

// mapLogs: LOG_LEVEL and LOG_FORMAT (json, else text).
func mapLogs(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	lvl, ok := logrusLevels[strings.ToLower(e.str("LOG_LEVEL"))]
	if !ok {
		return fmt.Errorf("LOG_LEVEL=%s: want trace, debug, info, warn, error, fatal or panic", e.str("LOG_LEVEL"))
	}
	m.flag("log-level", lvl)
	format := "text"
	if strings.EqualFold(e.str("LOG_FORMAT"), "json") {
		format = "json"
	}
	m.flag("log-format", format)
	return nil
}

// mapStats: USE_PROMETHEUS serves the node's metrics at PROMETHEUS_ADDR and
// PROMETHEUS_PATH; DISABLE_STATS serves none there.
func mapStats(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	if !promOn(e) {
		return nil
	}
	path := e.str("PROMETHEUS_PATH")
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("PROMETHEUS_PATH=%s: want a path starting with /", path)
	}
	m.promAddr, m.promPath = e.str("PROMETHEUS_ADDR"), path
	return nil
}
