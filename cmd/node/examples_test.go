package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	clusterpb "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routepb "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3" // its RateLimit, named by @type
	ratelimitfilterpb "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmpb "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3" // its HttpProtocolOptions, named by @type
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/node"
)

// The examples of docs/envoy.md ("Switching from envoyproxy/ratelimit"): each deploys
// leapcount's image in place of envoyproxy/ratelimit's. These tests check each against
// what runs it: the image (Dockerfile), the environment and command the deployment gives
// the container, read as `leapcount-node` reads them, and the files it mounts.

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// image is what the Dockerfile makes of the node image: its entrypoint and environment.
type image struct {
	entrypoint []string
	env        map[string]string
}

// readImage reads the Dockerfile's ENV and ENTRYPOINT lines (with their continuations).
func readImage(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	img := image{env: map[string]string{}}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "ENV":
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q: want KEY=VALUE", kv)
				}
				img.env[k] = v
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))), &img.entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT: %v", err)
			}
		}
	}
	if len(img.entrypoint) == 0 {
		t.Fatal("Dockerfile: no ENTRYPOINT")
	}
	return img
}

// containerConfig is the node the image would run given env (over the image's own) and
// argv (the entrypoint and the command the deployment gives it), as main reads them:
// it must be the ratelimit mode, and its config valid.
func containerConfig(img image, env map[string]string, argv []string) (node.Config, error) {
	all := maps.Clone(img.env)
	maps.Copy(all, env)
	args := commandArgs(argv)
	if len(args) == 0 || args[0] != "ratelimit" {
		return node.Config{}, fmt.Errorf("%q runs %q, not the ratelimit mode", argv, args)
	}
	flags, m, err := ratelimitFlags(args[1:], envOf(all))
	if err != nil {
		return node.Config{}, err
	}
	cfg, _, err := parseFlags(flags, envOf(all), io.Discard)
	if err != nil {
		return cfg, err
	}
	m.hooks().adjust(&cfg)
	return cfg, cfg.Validate()
}

// The image runs the ratelimit mode as envoyproxy/ratelimit's image runs its binary:
// /bin/ratelimit (a link in deploy/image, copied in by the Dockerfile) leads to the
// entrypoint, and the binary run under that name, or given /bin/ratelimit as its
// command, is `leapcount-node ratelimit`.
func TestImageRunsRatelimitAsBinRatelimit(t *testing.T) {
	img := readImage(t)
	target, err := os.Readlink(filepath.Join(repoRoot, "deploy", "image", "bin", "ratelimit"))
	if err != nil || target != img.entrypoint[0] {
		t.Errorf("deploy/image/bin/ratelimit: a link to %q (%v); want one to the entrypoint %q", target, err, img.entrypoint[0])
	}
	df, _ := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if !regexp.MustCompile(`(?m)^COPY deploy/image/ /$`).Match(df) || !regexp.MustCompile(`(?m)^COPY bin/leapcount-node `+regexp.QuoteMeta(img.entrypoint[0])+`$`).Match(df) {
		t.Errorf("the Dockerfile does not copy bin/leapcount-node to %s and deploy/image/ to /", img.entrypoint[0])
	}
	ignore, _ := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if !slices.Contains(strings.Fields(string(ignore)), "!deploy/image") {
		t.Error(".dockerignore leaves deploy/image out of the build context")
	}
	for _, c := range []struct {
		argv []string
		want []string
	}{
		{[]string{"/leapcount-node"}, []string{}},
		{[]string{"/leapcount-node", "ratelimit", "-h"}, []string{"ratelimit", "-h"}},
		{[]string{"/bin/ratelimit"}, []string{"ratelimit"}},
		{[]string{"ratelimit", "--log-level=debug"}, []string{"ratelimit", "--log-level=debug"}},
		{[]string{"/leapcount-node", "/bin/ratelimit"}, []string{"ratelimit"}},
		{[]string{"/leapcount-node", "status", "/bin/ratelimit"}, []string{"status", "/bin/ratelimit"}},
		{[]string{"/usr/bin/ratelimiter"}, []string{}},
	} {
		if got := commandArgs(c.argv); !slices.Equal(got, c.want) {
			t.Errorf("commandArgs(%q) = %q; want %q", c.argv, got, c.want)
		}
	}
}

// A node of the ratelimit mode given no join list and no advertised address is a
// cluster of one without Redis: its gossip and node-to-node ports move to 127.0.0.1
// (the image's 0.0.0.0 would need an advertised address), and stay where they were told
// otherwise. With Redis it joins the replicas listed there (--join-redis), unless
// LEAPCOUNT_JOIN_REDIS=false.
func TestRatelimitReplicasJoinThroughRedisOrListenOnLoopback(t *testing.T) {
	img := map[string]string{"LEAPCOUNT_GOSSIP": "0.0.0.0:7946", "LEAPCOUNT_RPC": "0.0.0.0:7947"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(img)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		env   map[string]string
		args  []string
		want  []string
		redis bool
	}{
		{img, nil, []string{"--join-redis"}, true},
		{with("LEAPCOUNT_JOIN_REDIS", "false"), nil, []string{"--gossip=127.0.0.1:7946", "--rpc=127.0.0.1:7947"}, true},
		{with("LEAPCOUNT_JOIN_REDIS", "true"), nil, nil, true},
		{with("LEAPCOUNT_JOIN", "a:7946"), nil, nil, true},
		{img, []string{"--join-redis=false"}, nil, true},
		{img, nil, []string{"--gossip=127.0.0.1:7946", "--rpc=127.0.0.1:7947"}, false},
		{map[string]string{}, nil, nil, false},
		{with("LEAPCOUNT_JOIN", "a:7946"), nil, nil, false},
		{with("LEAPCOUNT_ADVERTISE", "10.0.0.1"), nil, nil, false},
		{img, []string{"--advertise=10.0.0.1"}, nil, false},
		{img, []string{"-join", "a:7946"}, nil, false},
		{with("LEAPCOUNT_RPC", "[::]:9000"), nil, []string{"--gossip=127.0.0.1:7946", "--rpc=127.0.0.1:9000"}, false},
	} {
		if got := replicaFlags(envOf(c.env), c.args, c.redis); !slices.Equal(got, c.want) {
			t.Errorf("env %v args %q: %q; want %q", c.env, c.args, got, c.want)
		}
	}
	// The image's own environment, with envoyproxy/ratelimit's defaults, makes a valid
	// node (before: "invalid --advertise: needed when --rpc binds all interfaces").
	cfg, err := containerConfig(readImage(t), nil, []string{"/bin/ratelimit"})
	if err != nil {
		t.Fatalf("the image run as /bin/ratelimit with no variable: %v", err)
	}
	if cfg.RPCAddr != "127.0.0.1:7947" || cfg.GossipAddr != "127.0.0.1:7946" {
		t.Errorf("rpc %s, gossip %s; want both on 127.0.0.1", cfg.RPCAddr, cfg.GossipAddr)
	}
}

// The binary run as /bin/ratelimit runs (a link to it named ratelimit, started with
// no argument, as Envoy Gateway and Istio's sample start envoyproxy/ratelimit's image,
// with the image's environment, its ports made free ones) serves envoyproxy/ratelimit's
// /healthcheck and gRPC with its rules, its cluster ports on loopback.
func TestBinaryNamedRatelimitRunsTheRatelimitMode(t *testing.T) {
	link := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(nodeBinary(t), link); err != nil {
		t.Fatal(err)
	}
	root := runtimeRoot(t, "ratelimit", map[string]string{"edge.yaml": rlTestConfig})
	var env []string
	for k, v := range readImage(t).env {
		host, _, err := net.SplitHostPort(v)
		switch {
		case err != nil:
		case k == "LEAPCOUNT_GOSSIP" || k == "LEAPCOUNT_RPC":
			v = net.JoinHostPort(host, "0") // the image's host: the lone node's rule moves them to loopback
		default:
			v = "127.0.0.1:0"
		}
		env = append(env, k+"="+v)
	}
	p := startRatelimitCmd(t, exec.Command(link), append(env, "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_STATSD=false", "LOG_LEVEL=info", "LOG_FORMAT=json")...)
	for _, addr := range []string{p.rpc, p.gossip} {
		if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
			t.Errorf("a cluster port listens on %q; want 127.0.0.1", addr)
		}
	}
	if code, body := httpGet(t, "http://"+p.http+"/healthcheck"); code != 200 {
		t.Errorf("/healthcheck: %d %q", code, body)
	}
	checkGRPCFixedWindow(t, p.grpc)
}

// composeService is what the test reads of a service of a compose file.
type composeService struct {
	Image       string
	Command     any // a string (split as a shell splits it) or a list
	Environment any // KEY=VALUE items or a map
	Volumes     []string
	Ports       []string
	Profiles    []string
}

var composeVar = regexp.MustCompile(`\$\{(\w+)(?::-([^}]*))?\}`)

// interpolate does compose's ${VAR} and ${VAR:-default} from vars.
func interpolate(s string, vars map[string]string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		sm := composeVar.FindStringSubmatch(m)
		if v := vars[sm[1]]; v != "" {
			return v
		}
		return sm[2]
	})
}

// environment is a service's environment, interpolated.
func (s composeService) environment(t *testing.T, vars map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch e := s.Environment.(type) {
	case []any:
		for _, item := range e {
			k, v, _ := strings.Cut(fmt.Sprint(item), "=")
			env[k] = interpolate(v, vars)
		}
	case map[string]any:
		for k, v := range e {
			env[k] = interpolate(fmt.Sprint(v), vars)
		}
	case nil:
	default:
		t.Fatalf("environment %T: want a list or a map", e)
	}
	return env
}

// command is a service's command as argv items.
func (s composeService) command(t *testing.T) []string {
	t.Helper()
	switch c := s.Command.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		out := make([]string, len(c))
		for i, x := range c {
			out[i] = fmt.Sprint(x)
		}
		return out
	case nil:
		return nil
	}
	t.Fatalf("command %T: want a string or a list", s.Command)
	return nil
}

// examples/ratelimit-compose is envoyproxy/ratelimit's own example compose file with
// the ratelimit service's image ours: that service's environment and command, in the
// image, make a valid node of the ratelimit mode (with the rules of a directory, and,
// with the xds-config profile's CONFIG_TYPE, of the xDS server); the runtime directory
// its variables name is a volume, whose files load; and its Envoy's rate limit cluster
// is that service's gRPC port.
func TestRatelimitComposeExample(t *testing.T) {
	dir := filepath.Join(repoRoot, "examples", "ratelimit-compose")
	b, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Services map[string]composeService }
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	img := readImage(t)
	var ours []string
	for name, s := range file.Services {
		if strings.Contains(s.Image, "envoyproxy/ratelimit") {
			t.Errorf("service %s still runs envoyproxy/ratelimit's image (%s)", name, s.Image)
		}
		if strings.Contains(interpolate(s.Image, nil), "leapcount/node") {
			ours = append(ours, name)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("services running leapcount's image: %q; want one", ours)
	}
	name, svc := ours[0], file.Services[ours[0]]
	argv := append(slices.Clone(img.entrypoint), svc.command(t)...)

	cfg, err := containerConfig(img, svc.environment(t, nil), argv)
	if err != nil {
		t.Fatalf("service %s, as compose starts it: %v", name, err)
	}
	// The rules: a volume's target, its source's files loaded as the node loads them.
	var src string
	for _, v := range svc.Volumes {
		if from, to, _ := strings.Cut(v, ":"); strings.TrimSuffix(to, ":ro") == cfg.Limits {
			src = filepath.Join(dir, from)
		}
	}
	if src == "" {
		t.Fatalf("service %s reads its rules from %s, which no volume of %q mounts", name, cfg.Limits, svc.Volumes)
	}
	rules, _, err := limits.LoadPath(src, cfg.LimitsMerge)
	if err != nil {
		t.Fatalf("the rules of %s: %v", src, err)
	}
	if rules == nil {
		t.Fatalf("no rules in %s", src)
	}
	for _, p := range []string{port(t, cfg.GRPCAddr), port(t, cfg.HTTPAddr), "9090"} {
		if !slices.Contains(svc.Ports, p+":"+p) {
			t.Errorf("service %s does not publish port %s (ports %q)", name, p, svc.Ports)
		}
	}

	xds, err := containerConfig(img, svc.environment(t, map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}), argv)
	if err != nil {
		t.Fatalf("service %s with CONFIG_TYPE=GRPC_XDS_SOTW (profile xds-config): %v", name, err)
	}
	if xds.LimitsXDS == nil || !strings.HasPrefix(xds.LimitsXDS.Server, "ratelimit-xds-config-server:") {
		t.Errorf("with CONFIG_TYPE=GRPC_XDS_SOTW the rules come from %+v; want the compose file's xDS server", xds.LimitsXDS)
	}
	if _, ok := file.Services["ratelimit-xds-config-server"]; !ok {
		t.Error("no service ratelimit-xds-config-server")
	}

	// Envoy's rate limit cluster is this service's gRPC port.
	var proxy struct {
		StaticResources struct {
			Clusters []map[string]any
		} `yaml:"static_resources"`
	}
	pb, err := os.ReadFile(filepath.Join(dir, "envoy", "proxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(pb, &proxy); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range proxy.StaticResources.Clusters {
		if c["name"] != "ratelimit" {
			continue
		}
		cl := &clusterpb.Cluster{}
		protoFromYAML(t, c, cl)
		sa := cl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if sa.GetAddress() != name || fmt.Sprint(sa.GetPortValue()) != port(t, cfg.GRPCAddr) {
			t.Errorf("Envoy's cluster ratelimit is %s:%d; want %s:%s", sa.GetAddress(), sa.GetPortValue(), name, port(t, cfg.GRPCAddr))
		}
		found = true
	}
	if !found {
		t.Error("envoy/proxy.yaml has no cluster ratelimit")
	}
}

// protoFromYAML reads v (a YAML value decoded as any) into m as protobuf's JSON reader
// does: an unknown field, a wrong type or an unknown @type fails the test.
func protoFromYAML(t *testing.T, v any, m proto.Message) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		t.Fatalf("as %s: %v\n%s", m.ProtoReflect().Descriptor().FullName(), err, b)
	}
}

// egCommit is the commit of github.com/envoyproxy/gateway whose API types and rate
// limit Deployment egFields and envoyGatewayEnv are taken from.
const egCommit = "d32f28294245e454d20f81d323d626a90e660c1e"

// egFields are the JSON field names of the types of Envoy Gateway's API on the paths
// the example takes, each to its type's name in this map ("": not checked below), from
// api/v1alpha1/envoygateway_types.go and api/v1alpha1/shared_types.go at egCommit
// (inline structs flattened: EnvoyGateway holds TypeMeta and EnvoyGatewaySpec,
// EnvoyGatewayKubernetesProvider its infrastructure and Kubernetes configurations);
// EnvVar is k8s.io/api's core/v1 EnvVar.
var egFields = map[string]map[string]string{
	"EnvoyGateway": {"apiVersion": "", "kind": "", "gateway": "Gateway", "provider": "EnvoyGatewayProvider",
		"logging": "EnvoyGatewayLogging", "admin": "", "telemetry": "", "xdsServer": "", "rateLimit": "RateLimit",
		"extensionManager": "", "extensionManagers": "", "extensionApis": "", "gatewayAPI": "", "runtimeFlags": "", "envoyProxy": ""},
	"Gateway":              {"controllerName": ""},
	"EnvoyGatewayLogging":  {"level": "", "encoder": ""},
	"EnvoyGatewayProvider": {"type": "", "kubernetes": "EnvoyGatewayKubernetesProvider", "custom": ""},
	"EnvoyGatewayKubernetesProvider": {"rateLimitDeployment": "KubernetesDeploymentSpec", "rateLimitHpa": "", "rateLimitPDB": "",
		"deploy": "", "shutdownManager": "", "proxyTopologyInjector": "", "watch": "", "leaderElection": "", "client": "", "cacheSyncPeriod": ""},
	"KubernetesDeploymentSpec": {"patch": "", "replicas": "", "strategy": "", "pod": "", "container": "KubernetesContainerSpec",
		"initContainers": "", "name": ""},
	"KubernetesContainerSpec":  {"env": "EnvVar", "resources": "", "securityContext": "", "image": "", "imageRepository": "", "volumeMounts": ""},
	"EnvVar":                   {"name": "", "value": "", "valueFrom": ""},
	"RateLimit":                {"backend": "RateLimitDatabaseBackend", "timeout": "", "failClosed": "", "telemetry": "RateLimitTelemetry"},
	"RateLimitDatabaseBackend": {"type": "", "redis": "RateLimitRedisSettings"},
	"RateLimitRedisSettings":   {"url": "", "urlRef": "", "tls": ""},
	"RateLimitTelemetry":       {"metrics": "", "tracing": ""},
}

// egImage is KubernetesContainerSpec.Image's validation (its kubebuilder XValidation
// rule at egCommit).
var egImage = regexp.MustCompile(`^[a-zA-Z0-9._-]+(:[0-9]+)?(/[a-zA-Z0-9._/-]+)?(:[a-zA-Z0-9._-]+)?(@sha256:[a-z0-9]+)?$`)

// checkFields names every field of v (of type typ in egFields, or a list of them) that
// type has not.
func checkFields(path string, v any, typ string) []string {
	fields, ok := egFields[typ]
	if !ok {
		return nil
	}
	var bad []string
	switch v := v.(type) {
	case []any:
		for i, x := range v {
			bad = append(bad, checkFields(fmt.Sprintf("%s[%d]", path, i), x, typ)...)
		}
	case map[string]any:
		for k, x := range v {
			sub, ok := fields[k]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s.%s (%s has no such field)", path, k, typ))
				continue
			}
			bad = append(bad, checkFields(path+"."+k, x, sub)...)
		}
	default:
		bad = append(bad, fmt.Sprintf("%s: %T where %s wants an object", path, v, typ))
	}
	return bad
}

// envoyGatewayEnv is the environment Envoy Gateway gives its rate limit container
// (internal/infrastructure/kubernetes/ratelimit/resource.go at egCommit,
// expectedRateLimitContainerEnv) for a RateLimit with a Redis URL, no Redis TLS, its
// default Prometheus metrics and no tracing, then the container's env of the
// Deployment spec over it by name (resource.ExpectedContainerEnv). certs is the
// directory of the Secret it mounts at /certs.
func envoyGatewayEnv(redisURL, certs string, container []any) map[string]string {
	env := map[string]string{
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
		"LOG_LEVEL": "info", "USE_STATSD": "false", "CONFIG_TYPE": "GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key",
		"GRPC_SERVER_TLS_CA_CERT":        "/certs/ca.crt", // a name envoyproxy/ratelimit does not read (nor leapcount)
		"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt",
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt",
		"FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
		"REDIS_SOCKET_TYPE":                  "tcp", "REDIS_URL": redisURL,
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
	}
	for _, e := range container {
		e, _ := e.(map[string]any)
		env[fmt.Sprint(e["name"])] = fmt.Sprint(e["value"])
	}
	for k, v := range env {
		if strings.HasPrefix(v, "/certs/") {
			env[k] = filepath.Join(certs, strings.TrimPrefix(v, "/certs/"))
		}
	}
	return env
}

// egCerts writes what the Secret envoy-rate-limit holds (Envoy Gateway's certgen):
// tls.crt, tls.key and ca.crt, into a directory.
func egCerts(t *testing.T) string {
	t.Helper()
	dir, out := t.TempDir(), t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	f := ca.Issue(t, dir, "envoy-ratelimit")
	for from, to := range map[string]string{f.Cert: "tls.crt", f.Key: "tls.key", f.CA: "ca.crt"} {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(filepath.Join(out, to), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// examples/envoy-gateway/envoy-gateway.yaml is an EnvoyGateway whose every field on
// its paths is one of Envoy Gateway's API types (egFields), with rateLimitDeployment's
// image ours (valid as the API validates it) and one replica; and the container Envoy
// Gateway makes of it (its command /bin/ratelimit, its environment with the example's
// env over it) is a valid node of the ratelimit mode: gRPC over TLS, rules from Envoy
// Gateway's xDS server over TLS, Prometheus metrics on Envoy Gateway's port. Without
// PROMETHEUS_MAPPER_YAML, which Envoy Gateway sets, is said to be not read.
func TestEnvoyGatewayExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "envoy-gateway", "envoy-gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var eg map[string]any
	if err := yaml.Unmarshal(b, &eg); err != nil {
		t.Fatal(err)
	}
	if bad := checkFields("EnvoyGateway", eg, "EnvoyGateway"); len(bad) > 0 {
		t.Errorf("fields not in Envoy Gateway's API (at %s):\n%s", egCommit, strings.Join(bad, "\n"))
	}
	if eg["apiVersion"] != "gateway.envoyproxy.io/v1alpha1" || eg["kind"] != "EnvoyGateway" {
		t.Errorf("apiVersion %v, kind %v; want gateway.envoyproxy.io/v1alpha1 EnvoyGateway", eg["apiVersion"], eg["kind"])
	}
	get := func(path ...string) any {
		var v any = eg
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return v
	}
	if typ := get("provider", "type"); typ != "Kubernetes" {
		t.Errorf("provider.type %v; want Kubernetes (rateLimitDeployment is the Kubernetes provider's)", typ)
	}
	if typ := get("rateLimit", "backend", "type"); typ != "Redis" {
		t.Errorf("rateLimit.backend.type %v; want Redis, the one type there is", typ)
	}
	deploy := []string{"provider", "kubernetes", "rateLimitDeployment"}
	img, _ := get(append(deploy, "container", "image")...).(string)
	if !strings.Contains(img, "leapcount/node") || !egImage.MatchString(img) {
		t.Errorf("rateLimitDeployment.container.image %q: want leapcount's image, valid as Envoy Gateway's API checks it", img)
	}
	if r, _ := get(append(deploy, "replicas")...).(int); r < 2 {
		t.Errorf("rateLimitDeployment.replicas %v; want several: the replicas form one cluster through Redis", r)
	}
	redisURL, _ := get("rateLimit", "backend", "redis", "url").(string)
	containerEnv, _ := get(append(deploy, "container", "env")...).([]any)
	certs := egCerts(t)

	cfg, err := containerConfig(readImage(t), envoyGatewayEnv(redisURL, certs, containerEnv), []string{"/bin/ratelimit"})
	if err != nil {
		t.Fatalf("the container Envoy Gateway runs: %v", err)
	}
	if cfg.GRPCTLSAddr != "0.0.0.0:8081" || cfg.GRPCAddr != "" || cfg.HTTPAddr != "0.0.0.0:8080" {
		t.Errorf("gRPC over TLS %q, plaintext %q, HTTP %q; want TLS on 0.0.0.0:8081 (Envoy Gateway's port) alone, HTTP (its probes' /healthcheck) on 0.0.0.0:8080",
			cfg.GRPCTLSAddr, cfg.GRPCAddr, cfg.HTTPAddr)
	}
	if x := cfg.LimitsXDS; x == nil || x.Server != "envoy-gateway:18001" || x.NodeID != "envoy-ratelimit" || x.TLS == nil {
		t.Errorf("xDS %+v; want Envoy Gateway's server envoy-gateway:18001 over TLS, node envoy-ratelimit", x)
	}
	if !strings.HasPrefix(cfg.RedisURL, "redis://"+redisURL) {
		t.Errorf("Redis %q; want rateLimit.backend.redis.url's, %s", cfg.RedisURL, redisURL)
	}
	if !cfg.JoinRedis || cfg.Advertise != "" || cfg.GossipAddr != "0.0.0.0:7946" || cfg.RPCAddr != "0.0.0.0:7947" {
		t.Errorf("join through Redis %v, advertise %q, gossip %s, rpc %s; want the replicas to find each other through Redis, their cluster ports on every interface, the address advertised the one Redis is reached from",
			cfg.JoinRedis, cfg.Advertise, cfg.GossipAddr, cfg.RPCAddr)
	}
	m, _ := mapRatelimitEnv(envOf(envoyGatewayEnv(redisURL, certs, containerEnv)))
	if m == nil || m.promAddr != ":19001" {
		t.Errorf("Prometheus listener %+v; want Envoy Gateway's metrics port :19001", m)
	}

	if m == nil || len(m.notes) != 1 || !strings.HasPrefix(m.notes[0], "PROMETHEUS_MAPPER_YAML=") {
		t.Errorf("notes at start %q; want one, that PROMETHEUS_MAPPER_YAML (which Envoy Gateway sets) is not read", m.notes)
	}
}

// k8sObject is what the test reads of a Kubernetes object.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct {
		Name, Namespace string
	}
	Data map[string]string
	Spec map[string]any
}

// istioKinds are the kinds examples/istio/envoyfilter.yaml holds, with their apiVersions.
var istioKinds = map[string]string{"ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "EnvoyFilter": "networking.istio.io/v1alpha3"}

// examples/istio/envoyfilter.yaml is Istio's global rate limit task with leapcount's
// image: each object of a known kind and apiVersion; the EnvoyFilters' patches read by
// Envoy's own protos (the HTTP filter, the cluster, the virtual host's rate limit
// actions); the filter's domain the ConfigMap's rules', which load; its cluster the
// Service ratelimit's gRPC port, which is the Deployment's; and the Deployment's
// container, in the image, a valid node of the ratelimit mode reading the ConfigMap's
// mount.
func TestIstioExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "istio", "envoyfilter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]k8sObject{} // kind → name → object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if want, ok := istioKinds[o.Kind]; !ok || o.APIVersion != want {
			t.Errorf("%s %s: apiVersion %s; want one of %v", o.Kind, o.Metadata.Name, o.APIVersion, istioKinds)
		}
		if objs[o.Kind] == nil {
			objs[o.Kind] = map[string]k8sObject{}
		}
		objs[o.Kind][o.Metadata.Name] = o
	}
	if len(objs["EnvoyFilter"]) != 2 {
		t.Fatalf("EnvoyFilters %v; want the task's two", slices.Collect(maps.Keys(objs["EnvoyFilter"])))
	}

	// The EnvoyFilters' patches, by what they apply to.
	var filter *ratelimitfilterpb.RateLimit
	var cluster *clusterpb.Cluster
	var clusterMatch string
	var vhost *routepb.VirtualHost
	for _, ef := range objs["EnvoyFilter"] {
		patches, _ := ef.Spec["configPatches"].([]any)
		for _, p := range patches {
			p, _ := p.(map[string]any)
			patch, _ := p["patch"].(map[string]any)
			switch p["applyTo"] {
			case "HTTP_FILTER":
				hf := &hcmpb.HttpFilter{}
				protoFromYAML(t, patch["value"], hf)
				filter = &ratelimitfilterpb.RateLimit{}
				if err := hf.GetTypedConfig().UnmarshalTo(filter); err != nil || hf.GetName() != "envoy.filters.http.ratelimit" {
					t.Fatalf("the HTTP filter %s: %v; want envoy.filters.http.ratelimit's RateLimit", hf.GetName(), err)
				}
			case "CLUSTER":
				cluster = &clusterpb.Cluster{}
				protoFromYAML(t, patch["value"], cluster)
				clusterMatch = fmt.Sprint(p["match"].(map[string]any)["cluster"].(map[string]any)["service"])
			case "VIRTUAL_HOST":
				vhost = &routepb.VirtualHost{}
				protoFromYAML(t, patch["value"], vhost)
			default:
				t.Errorf("EnvoyFilter %s patches %v", ef.Metadata.Name, p["applyTo"])
			}
		}
	}
	if filter == nil || cluster == nil || vhost == nil || len(vhost.GetRateLimits()) == 0 {
		t.Fatalf("want an HTTP filter, a cluster and a virtual host's rate limits among the patches")
	}
	if got := filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != cluster.GetName() {
		t.Errorf("the filter asks cluster %q; the patch adds %q", got, cluster.GetName())
	}

	// The rules: the filter's domain, loaded as the node loads them.
	cm := objs["ConfigMap"]["ratelimit-config"]
	rulesDir := t.TempDir()
	for name, body := range cm.Data {
		if err := os.WriteFile(filepath.Join(rulesDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := limits.LoadPath(rulesDir, false); err != nil {
		t.Fatalf("the ConfigMap's rules: %v", err)
	}
	if !strings.Contains(cm.Data["config.yaml"], "domain: "+filter.GetDomain()+"\n") {
		t.Errorf("the filter's domain %q is not the ConfigMap's", filter.GetDomain())
	}

	// The Deployment in the image.
	dep := objs["Deployment"]["ratelimit"]
	var pod struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			Containers []struct {
				Image        string
				Command      []string
				Args         []string
				Env          []struct{ Name, Value string }
				VolumeMounts []struct {
					Name      string
					MountPath string `yaml:"mountPath"`
				} `yaml:"volumeMounts"`
			}
			Volumes []struct {
				Name      string
				ConfigMap struct{ Name string } `yaml:"configMap"`
			}
		}
	}
	tb, _ := yaml.Marshal(dep.Spec["template"])
	if err := yaml.Unmarshal(tb, &pod); err != nil || len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Deployment's pod: %v, %d containers; want one", err, len(pod.Spec.Containers))
	}
	if r := dep.Spec["replicas"]; r != 1 {
		t.Errorf("replicas %v; want 1: leapcount's replicas do not form one cluster behind one Service yet", r)
	}
	c := pod.Spec.Containers[0]
	if !strings.Contains(c.Image, "leapcount/node") {
		t.Errorf("the Deployment runs %s; want leapcount's image", c.Image)
	}
	img := readImage(t)
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(c.Command) == 0 {
		argv = append(slices.Clone(img.entrypoint), c.Args...)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	cfg, err := containerConfig(img, env, argv)
	if err != nil {
		t.Fatalf("the Deployment's container: %v", err)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap.Name == cm.Metadata.Name && vm.MountPath == cfg.Limits {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("the node reads its rules from %s, where the ConfigMap %s is not mounted", cfg.Limits, cm.Metadata.Name)
	}

	// The cluster: the Service ratelimit (namespace default), its port to the node's gRPC port.
	sa := cluster.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	svcName, _, _ := strings.Cut(sa.GetAddress(), ".")
	if want := svcName + ".default.svc.cluster.local"; sa.GetAddress() != want || clusterMatch != want {
		t.Errorf("the cluster reaches %s, its patch matches %s; want %s", sa.GetAddress(), clusterMatch, want)
	}
	svc, ok := objs["Service"][svcName]
	if !ok {
		t.Fatalf("no Service %s", svcName)
	}
	var ports struct {
		Ports []struct {
			Port       int
			TargetPort int `yaml:"targetPort"`
		}
		Selector map[string]string
	}
	sb, _ := yaml.Marshal(svc.Spec)
	if err := yaml.Unmarshal(sb, &ports); err != nil {
		t.Fatal(err)
	}
	target := -1
	for _, p := range ports.Ports {
		if uint32(p.Port) == sa.GetPortValue() {
			target = p.TargetPort
		}
	}
	if fmt.Sprint(target) != port(t, cfg.GRPCAddr) {
		t.Errorf("Service %s's port %d goes to %d; the node's gRPC port is %s", svcName, sa.GetPortValue(), target, port(t, cfg.GRPCAddr))
	}
	for k, v := range ports.Selector {
		if pod.Metadata.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the Deployment's pods do not have", svcName, k, v)
		}
	}
}
