package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/ring"
)

// flagValues holds what the flags say, before it is checked and made a node.Config.
type flagValues struct {
	cfg                            node.Config
	join, gossipKey, gossipKeyFile string
	log                            logOptions
}

// newFlagSet defines every flag of the node, each bound to a field of v. It is the one
// list of the node's flags: parsing uses it, and so does the check of the Helm chart's
// pod spec (chart_test.go), which must name no flag that is not here.
func newFlagSet(v *flagValues, stderr io.Writer) *flag.FlagSet {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&v.cfg.Name, "name", host, "unique member name")
	fs.StringVar(&v.cfg.HTTPAddr, "http", node.DefaultHTTPAddr, "HTTP listen address (empty: no plaintext HTTP, e.g. with --http-tls)")
	fs.StringVar(&v.cfg.RESPAddr, "resp", node.DefaultRESPAddr, "RESP (Redis protocol) listen address (empty: no plaintext RESP, e.g. with --resp-tls)")
	fs.StringVar(&v.cfg.HTTPTLSAddr, "http-tls", "", "HTTP over TLS listen address, with --client-tls-cert and --client-tls-key (empty: none)")
	fs.StringVar(&v.cfg.RESPTLSAddr, "resp-tls", "", "RESP over TLS listen address, with --client-tls-cert and --client-tls-key (empty: none)")
	fs.StringVar(&v.cfg.GRPCTLSAddr, "grpc-tls", "", "--grpc over TLS (ALPN h2) listen address, with --client-tls-cert and --client-tls-key (empty: none)")
	fs.StringVar(&v.cfg.RESPClusterTLSAddr, "resp-cluster-tls", "", "--resp-cluster over TLS instead (not both): Redis Cluster clients are told this address (empty: none)")
	fs.StringVar(&v.cfg.ClientTLSCertFile, "client-tls-cert", "", "the certificate (PEM, chain after it) the TLS client ports present; reloaded when it changes")
	fs.StringVar(&v.cfg.ClientTLSKeyFile, "client-tls-key", "", "the private key (PEM) of --client-tls-cert")
	fs.StringVar(&v.cfg.ClientTLSCAFile, "client-tls-ca", "", "if set, every client of the TLS ports must present a certificate that chains to this CA bundle (PEM): mutual TLS")
	fs.StringVar(&v.cfg.GossipAddr, "gossip", node.DefaultGossipAddr, "memberlist bind address (TCP and UDP)")
	fs.StringVar(&v.cfg.RESPCluster, "resp-cluster", "", "a second RESP listen address for Redis Cluster clients: keys of other nodes are answered -MOVED (empty: none)")
	fs.StringVar(&v.cfg.RESPClusterAdvertise, "resp-cluster-advertise", "", "host:port Redis Cluster clients reach --resp-cluster at (default: the --advertise host and the bound port)")
	fs.StringVar(&v.cfg.RPCAddr, "rpc", node.DefaultRPCAddr, "node-to-node listen address")
	fs.StringVar(&v.cfg.GRPCAddr, "grpc", "", "gRPC listen address of Envoy's rate limit service (envoy.service.ratelimit.v3) with health and reflection, e.g. 127.0.0.1:8090 (empty: off)")
	fs.StringVar(&v.cfg.Limits, "limits", "", "rate limit rules for --grpc: envoyproxy/ratelimit YAML, a file or a directory of .yaml/.yml files, reloaded when they change")
	fs.BoolVar(&v.cfg.LimitsMerge, "limits-merge", false, "a domain configured in several --limits files merges (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); default: an error")
	fs.IntVar(&v.cfg.LimitsBuckets, "limits-buckets", 0, "buckets of a --limits window that names none (0: 10, sliding; 1: fixed, epoch-aligned windows as envoyproxy/ratelimit's)")
	fs.BoolVar(&v.cfg.RLSDeniedConsumesNothing, "rls-denied-consumes-nothing", false, "a --grpc request that one descriptor denies counts in none of its others, in every domain (per domain: denied_consumes_nothing: true in its --limits file); default: as envoyproxy/ratelimit, it counts in all")
	fs.DurationVar(&v.cfg.RLQSTTL, "rlqs-ttl", node.DefaultRLQSTTL, "assignment_time_to_live of --grpc's Rate Limit Quota Service (envoy.service.rate_limit_quota.v3): two or three of the Envoys' reporting_interval")
	fs.BoolVar(&v.cfg.Slices, "slices", false, "ask owners for slices of hot counters' limits and decide their allows here, never past the limit but short of it by the slices outstanding (off: forward every allow)")
	fs.IntVar(&v.cfg.SliceAfter, "slice-after", node.DefaultSliceAfter, "allows of one counter a second this node forwards before it asks for slices of its limit")
	fs.DurationVar(&v.cfg.RLQSDelivery, "rlqs-delivery", node.DefaultRLQSDelivery, "how late an RLQS assignment may reach its Envoy: each is paid for in its limit until --rlqs-ttl and this after it was sent")
	fs.BoolVar(&v.cfg.RLSHeaders, "rls-headers", false, "add RateLimit-Limit, -Remaining and -Reset headers to --grpc answers (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED)")
	fs.StringVar(&v.cfg.Advertise, "advertise", "", "host other nodes use to reach this one (default: the bind host)")
	fs.StringVar(&v.join, "join", "", "comma-separated gossip addresses (host:port) of existing members; a DNS name stands for every address it resolves to, resolved again at each re-join (a Kubernetes headless Service)")
	fs.BoolVar(&v.cfg.JoinRedis, "join-redis", false, "list this node's gossip address in --redis and join the members listed there (replicas no name lists: a Deployment behind one Service); with --rpc on all interfaces and no --advertise, advertise the address Redis is reached from")
	fs.StringVar(&v.cfg.RedisURL, "redis", "", "Redis URL redis://[user:pass@]host:port/db (empty: no fallback, no persistence)")
	fs.IntVar(&v.cfg.RedisWaitReplicas, "redis-wait-replicas", 0, "a write to Redis is confirmed once this many replicas acknowledged it too (WAIT), so that a failover to a replica loses none (in a Redis Cluster: replicas of the master written to; 0: the master's answer is enough)")
	fs.DurationVar(&v.cfg.RedisWaitTimeout, "redis-wait-timeout", 0, "how long each write waits for --redis-wait-replicas before it counts as in doubt and is sent again (0: half the read timeout, 100ms)")
	fs.StringVar(&v.cfg.Token, "token", "", "if set, clients must send it (HTTP: Authorization: Bearer; RESP: AUTH); other local users can read it in the process list: prefer --token-file or LEAPCOUNT_TOKEN")
	fs.StringVar(&v.cfg.TokenFile, "token-file", "", "read the token from this file (trailing newline trimmed) instead of --token")
	fs.StringVar(&v.cfg.TLSCertFile, "tls-cert", "", "this node's certificate (PEM) for mutual TLS between nodes (with --tls-key and --tls-ca)")
	fs.StringVar(&v.cfg.TLSKeyFile, "tls-key", "", "the private key (PEM) of --tls-cert")
	fs.StringVar(&v.cfg.TLSCAFile, "tls-ca", "", "the CA (PEM) that signs every member's certificate; use one of the cluster's own")
	fs.StringVar(&v.gossipKey, "gossip-key", "", "cluster key(s), base64 of 16/24/32 bytes, comma-separated, the first in use: encrypts gossip and authenticates nodes to each other")
	fs.StringVar(&v.gossipKeyFile, "gossip-key-file", "", "file holding --gossip-key (keeps it out of /proc/<pid>/cmdline)")
	fs.StringVar(&v.cfg.ClusterName, "cluster-name", "", "cluster name: nodes of another cluster are refused on gossip and rpc")
	fs.IntVar(&v.cfg.MaxKeyBytes, "max-key-bytes", 256, "longest key accepted, in bytes")
	fs.Int64Var(&v.cfg.MaxBodyBytes, "max-body-bytes", node.DefaultMaxBodyBytes, "largest HTTP request body accepted, in bytes")
	fs.Float64Var(&v.cfg.TLSHandshakeRate, "tls-handshake-rate", node.DefaultTLSHandshakeRate, "TLS handshakes a second the client TLS ports begin, all together (a second's worth at once); one beyond waits its turn up to 5 s (half of the 10 s handshake timeout), else its connection is closed; negative: no bound")
	fs.IntVar(&v.cfg.MaxClients, "max-clients", node.DefaultMaxClients, "most open client connections, on RESP, on HTTP and on gRPC each; more are refused")
	fs.DurationVar(&v.cfg.RESPIdleTimeout, "resp-idle-timeout", node.DefaultRESPIdleTimeout, "close a RESP connection that sends nothing for this long (0: never)")
	fs.Int64Var(&v.cfg.MaxCounters, "max-counters", 0, "most counters this node holds (one of more than 16 buckets counts once per 16); new ones beyond are refused (0: a quarter of memory, logged at start)")
	fs.IntVar(&v.cfg.MaxShapes, "max-shapes", node.DefaultMaxShapes, "most distinct (window, buckets) shapes this node holds counters of")
	fs.DurationVar(&v.cfg.SweepInterval, "sweep-interval", node.DefaultSweepInterval, "how often idle counters are looked for")
	fs.Int64Var(&v.cfg.GCHeadroom, "gc-headroom", node.DefaultGCHeadroom, "most the Go heap may grow by between collections for the allocation rate (a quarter second's allocations), in bytes (-1: as GOGC and the store give); more costs RSS, less costs CPU")
	fs.DurationVar(&v.cfg.ShutdownTimeout, "shutdown-timeout", node.DefaultShutdownTimeout, "longest a graceful stop may take")
	fs.DurationVar(&v.cfg.FlushInterval, "flush-interval", node.DefaultFlushInterval, "how often owners write counter deltas to Redis (write-behind)")
	fs.DurationVar(&v.cfg.HandoffWait, "handoff-wait", node.DefaultHandoffWait, "how long an op waits for its partition's new owner to take it over")
	fs.DurationVar(&v.cfg.Lease.Duration, "lease", lease.DefaultDuration, "partition lease: how long a node decides after a majority renewed it (same on every node)")
	fs.StringVar(&v.cfg.Placement, "placement", node.PlacementMatching, "how partitions spread over members: matching (even shares, the busiest member within 1.1x the average; used once every member supports it, the old placement until then) or consistent (the placement of releases before matching, kept cluster-wide while any member asks for it)")
	fs.IntVar(&v.cfg.Partitions, "partitions", ring.DefaultPartitionCount, "partitions the ring places, the 16384 hash slots grouped evenly: 4096, 8192 or 16384 (same on every node: a node with another count never joins). More even out what a join or a leave moves, about 1.0/N of the keys at 64 members with 16384 against 1.2/N with 4096, for larger lease messages and owner tables")
	fs.StringVar(&v.cfg.Zone, "zone", "", "this node's failure domain (a rack, an availability zone; at most 16 bytes of letters, digits, '.', '_', '-'): the voters spread over the zones, so one zone's loss keeps a majority of them. Set it once every member runs a release that knows zones")
	fs.IntVar(&v.cfg.Lease.Voters, "voters", lease.DefaultVoters, "most members that grant leases (odd; same on every node): the rest hold leases without granting, so a lease costs what it costs with this many; below five members at most three")
	fs.DurationVar(&v.cfg.GossipTimings.ProbeInterval, "gossip-probe-interval", node.DefaultGossipProbeInterval, "failure detection: how often each node probes a random peer")
	fs.DurationVar(&v.cfg.GossipTimings.ProbeTimeout, "gossip-probe-timeout", node.DefaultGossipProbeTimeout, "failure detection: how long a probe waits for its answer (below --gossip-probe-interval)")
	fs.IntVar(&v.cfg.GossipTimings.SuspicionMult, "gossip-suspicion-mult", node.DefaultGossipSuspicionMult, "failure detection: probe intervals a suspected node has to refute before it is declared dead")
	fs.IntVar(&v.cfg.RPC.MaxBatchOps, "forward-batch", 512, "most ops in one frame forwarded to an owner (1: no batching)")
	fs.DurationVar(&v.cfg.RPC.Linger, "forward-linger", 20*time.Microsecond, "how long a part-full frame to an owner waits for more ops, while --forward-inflight others wait for their answers")
	fs.IntVar(&v.cfg.RPC.InFlight, "forward-inflight", 1, "frames to one owner that may wait for their answers before the next part-full one lingers")
	fs.BoolVar(&v.cfg.Pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address (behind --token when set)")
	fs.DurationVar(&v.cfg.TestClockOffset, "test-clock-offset", 0, "TEST ONLY, never in production: shift this node's counter clock (which bucket an op lands in) by this much, e.g. 250ms or -2s, to test clock skew between containers that share the host's clock")
	fs.BoolVar(&v.cfg.FailOpen, "fail-open", false, "when neither the owner nor Redis can decide, allow answers allowed (default: denied)")
	fs.StringVar(&v.log.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&v.log.format, "log-format", "text", "text or json")
	fs.Usage = nodeUsage(fs)
	return fs
}

// readFlags parses the command line, then the environment for every flag the command
// line left out. It reads no file and checks nothing beyond each value's syntax.
func readFlags(args []string, env func(string) (string, bool), stderr io.Writer) (*flagValues, error) {
	v := &flagValues{}
	fs := newFlagSet(v, stderr)
	if err := parseQuietly(fs, args); err != nil {
		return v, err
	}
	if fs.NArg() > 0 {
		return v, fmt.Errorf("unexpected argument %q (flags take the form --name=value; run with -h for usage)", fs.Arg(0))
	}
	if err := applyEnv(fs, env); err != nil {
		return v, err
	}
	v.cfg.Join = splitList(v.join)
	// An empty --http or --resp (on the command line or in the environment) switches
	// that plaintext port off; node.Config's empty address means the default.
	v.cfg.HTTPOff, v.cfg.RESPOff = v.cfg.HTTPAddr == "", v.cfg.RESPAddr == ""
	return v, nil
}

// parseFlags reads the command line and the environment, reads the key file, and
// checks the result.
func parseFlags(args []string, env func(string) (string, bool), stderr io.Writer) (node.Config, logOptions, error) {
	v, err := readFlags(args, env, stderr)
	if err != nil {
		return v.cfg, v.log, err
	}
	keys, err := gossipKeys(v.gossipKey, v.gossipKeyFile)
	if err != nil {
		return v.cfg, v.log, err
	}
	v.cfg.GossipKeys = keys
	return v.cfg, v.log, v.cfg.Validate()
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// gossipKeys reads the keys of --gossip-key or of --gossip-key-file (not both).
func gossipKeys(keys, file string) ([][]byte, error) {
	if file != "" {
		if keys != "" {
			return nil, errors.New("invalid --gossip-key-file: give --gossip-key or --gossip-key-file, not both")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("invalid --gossip-key-file: %v", err)
		}
		if keys = string(b); strings.TrimSpace(keys) == "" {
			return nil, fmt.Errorf("invalid --gossip-key-file: %s holds no key", file)
		}
	}
	return node.ParseGossipKeys(keys)
}

// applyEnv sets each flag not given on the command line from LEAPCOUNT_<NAME>.
func applyEnv(fs *flag.FlagSet, env func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := EnvName(f.Name)
		if v, ok := env(name); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("invalid %s %q for --%s: %s", name, v, f.Name, valueProblem(f, serr.Error()))
			}
		}
	})
	return err
}

// EnvName is the environment variable that sets a flag: LEAPCOUNT_ and the flag's name
// in upper case with "-" as "_".
func EnvName(flagName string) string {
	return "LEAPCOUNT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
