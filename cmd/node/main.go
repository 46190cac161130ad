// Command node runs one leapcount node. With no flags it serves a single node on
// 127.0.0.1 (HTTP :8080, RESP :6380) with nothing else needed.
//
// Every flag also reads from the environment as LEAPCOUNT_<NAME> (upper case, "-" as
// "_"); a flag on the command line beats the variable. SIGTERM or SIGINT stops the node
// gracefully and it exits 0. A bad flag value stops it at start (exit 2) with a message
// naming the flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/node"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.Args[2:], os.LookupEnv, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stderr))
}

// run parses args and the environment, starts the node and waits for a signal. It
// returns the exit code: 0 after a graceful stop, 1 if the node failed, 2 for bad flags.
func run(args []string, env func(string) (string, bool), stderr io.Writer) int {
	cfg, logOpts, err := parseFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "node: %v\n", err)
		return 2
	}
	logger, err := logOpts.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "node: %v\n", err)
		return 2
	}
	cfg.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := node.Start(cfg)
	if err != nil {
		var cerr *node.ConfigError
		if errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "node: %v\n", err)
			return 2
		}
		logger.Error("node failed to start", "err", err)
		return 1
	}
	<-ctx.Done()
	stop() // a second signal now kills the process the default way
	if err := n.Stop(context.Background()); err != nil {
		logger.Error("graceful stop failed", "err", err)
		return 1
	}
	return 0
}

// logOptions are the flags that shape the log.
type logOptions struct {
	level  string
	format string
}

func (o logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", o.level)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(o.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q: want text or json", o.format)
}

// parseFlags reads the command line, then the environment for every flag the command
// line left out, and checks the result.
func parseFlags(args []string, env func(string) (string, bool), stderr io.Writer) (node.Config, logOptions, error) {
	host, _ := os.Hostname()
	var cfg node.Config
	var join, gossipKey, gossipKeyFile string
	lo := logOptions{}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Name, "name", host, "unique member name")
	fs.StringVar(&cfg.HTTPAddr, "http", node.DefaultHTTPAddr, "HTTP listen address")
	fs.StringVar(&cfg.RESPAddr, "resp", node.DefaultRESPAddr, "RESP (Redis protocol) listen address")
	fs.StringVar(&cfg.GossipAddr, "gossip", node.DefaultGossipAddr, "memberlist bind address (TCP and UDP)")
	fs.StringVar(&cfg.RESPCluster, "resp-cluster", "", "a second RESP listen address for Redis Cluster clients: keys of other nodes are answered -MOVED (empty: none)")
	fs.StringVar(&cfg.RESPClusterAdvertise, "resp-cluster-advertise", "", "host:port Redis Cluster clients reach --resp-cluster at (default: the --advertise host and the bound port)")
	fs.StringVar(&cfg.RPCAddr, "rpc", node.DefaultRPCAddr, "node-to-node listen address")
	fs.StringVar(&cfg.Advertise, "advertise", "", "host other nodes use to reach this one (default: the bind host)")
	fs.StringVar(&join, "join", "", "comma-separated gossip addresses of existing members")
	fs.StringVar(&cfg.RedisURL, "redis", "", "Redis URL redis://[user:pass@]host:port/db (empty: no fallback, no persistence)")
	fs.StringVar(&cfg.Token, "token", "", "if set, clients must send it (HTTP: Authorization: Bearer; RESP: AUTH); other local users can read it in the process list: prefer --token-file or LEAPCOUNT_TOKEN")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "read the token from this file (trailing newline trimmed) instead of --token")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "this node's certificate (PEM) for mutual TLS between nodes (with --tls-key and --tls-ca)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "the private key (PEM) of --tls-cert")
	fs.StringVar(&cfg.TLSCAFile, "tls-ca", "", "the CA (PEM) that signs every member's certificate; use one of the cluster's own")
	fs.StringVar(&gossipKey, "gossip-key", "", "cluster key(s), base64 of 16/24/32 bytes, comma-separated, the first in use: encrypts gossip and authenticates nodes to each other")
	fs.StringVar(&gossipKeyFile, "gossip-key-file", "", "file holding --gossip-key (keeps it out of /proc/<pid>/cmdline)")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "", "cluster name: nodes of another cluster are refused on gossip and rpc")
	fs.IntVar(&cfg.MaxKeyBytes, "max-key-bytes", 256, "longest key accepted, in bytes")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", node.DefaultMaxBodyBytes, "largest HTTP request body accepted, in bytes")
	fs.IntVar(&cfg.MaxClients, "max-clients", node.DefaultMaxClients, "most open client connections, on RESP and on HTTP each; more are refused")
	fs.DurationVar(&cfg.RESPIdleTimeout, "resp-idle-timeout", node.DefaultRESPIdleTimeout, "close a RESP connection that sends nothing for this long (0: never)")
	fs.Int64Var(&cfg.MaxCounters, "max-counters", 0, "most counters this node holds (one of more than 16 buckets counts once per 16); new ones beyond are refused (0: a quarter of memory, logged at start)")
	fs.IntVar(&cfg.MaxShapes, "max-shapes", node.DefaultMaxShapes, "most distinct (window, buckets) shapes this node holds counters of")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", node.DefaultSweepInterval, "how often idle counters are looked for")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", node.DefaultShutdownTimeout, "longest a graceful stop may take")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", node.DefaultFlushInterval, "how often owners write counter deltas to Redis (write-behind)")
	fs.DurationVar(&cfg.HandoffWait, "handoff-wait", node.DefaultHandoffWait, "how long an op waits for its partition's new owner to take it over")
	fs.DurationVar(&cfg.Lease.Duration, "lease", lease.DefaultDuration, "partition lease: how long a node decides after a majority renewed it (same on every node)")
	fs.DurationVar(&cfg.GossipTimings.ProbeInterval, "gossip-probe-interval", time.Second, "failure detection: how often each node probes a random peer")
	fs.DurationVar(&cfg.GossipTimings.ProbeTimeout, "gossip-probe-timeout", 500*time.Millisecond, "failure detection: how long a probe waits for its answer (below --gossip-probe-interval)")
	fs.IntVar(&cfg.GossipTimings.SuspicionMult, "gossip-suspicion-mult", 4, "failure detection: probe intervals a suspected node has to refute before it is declared dead")
	fs.IntVar(&cfg.RPC.MaxBatchOps, "forward-batch", 512, "most ops in one frame forwarded to an owner (1: no batching)")
	fs.DurationVar(&cfg.RPC.Linger, "forward-linger", 20*time.Microsecond, "how long a part-full frame to an owner waits for more ops, while others are in flight")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the HTTP address (behind --token when set)")
	fs.DurationVar(&cfg.TestClockOffset, "test-clock-offset", 0, "TEST ONLY, never in production: shift this node's counter clock (which bucket an op lands in) by this much, e.g. 250ms or -2s, to test clock skew between containers that share the host's clock")
	fs.BoolVar(&cfg.FailOpen, "fail-open", false, "when neither the owner nor Redis can decide, allow answers allowed (default: denied)")
	fs.StringVar(&lo.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&lo.format, "log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return cfg, lo, err
	}
	if fs.NArg() > 0 {
		return cfg, lo, fmt.Errorf("unexpected argument %q (flags take the form --name=value)", fs.Arg(0))
	}
	if err := applyEnv(fs, env); err != nil {
		return cfg, lo, err
	}
	if join != "" {
		for _, j := range strings.Split(join, ",") {
			if j = strings.TrimSpace(j); j != "" {
				cfg.Join = append(cfg.Join, j)
			}
		}
	}
	keys, err := gossipKeys(gossipKey, gossipKeyFile)
	if err != nil {
		return cfg, lo, err
	}
	cfg.GossipKeys = keys
	return cfg, lo, cfg.Validate()
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
				err = fmt.Errorf("invalid %s %q for --%s: %v", name, v, f.Name, serr)
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
