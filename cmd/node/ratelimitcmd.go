package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// ratelimitCmd is the "ratelimit" subcommand: a node configured by envoyproxy/ratelimit's
// environment (flags after it beat the variables), or exit 2 naming a variable it
// refuses.
func ratelimitCmd(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintf(stdout, "Usage: leapcount-node ratelimit [flags]\n\n"+
				"Runs a node configured by envoyproxy/ratelimit's environment variables (docs/envoy.md,\n"+
				"\"Switching from envoyproxy/ratelimit\"); %s=true turns sliding windows on.\n"+
				"The node's flags (leapcount-node -h) after it, and LEAPCOUNT_<NAME> for flags no variable sets, apply too.\n", slidingWindowsEnv)
			return 0
		}
	}
	flags, m, err := ratelimitFlags(args, env)
	if err != nil {
		fmt.Fprintf(stderr, "leapcount-node ratelimit: %v\n", err)
		return 2
	}
	for _, n := range m.notes {
		fmt.Fprintf(stderr, "leapcount-node ratelimit: %s\n", n)
	}
	return runNode(flags, env, stderr, m.hooks())
}

// ratelimitFlags is the node's command line in this mode: the variables' flags, then
// replicaFlags, then args (given after `ratelimit`, so they win).
func ratelimitFlags(args []string, env func(string) (string, bool)) ([]string, *rlMapping, error) {
	m, err := mapRatelimitEnv(env)
	if err != nil {
		return nil, nil, err
	}
	flags := append(append(m.flags, replicaFlags(env, args, m.has("redis"))...), args...)
	return flags, m, nil
}

// replicaFlags makes the replicas of one Deployment one cluster, as envoyproxy/ratelimit's
// replicas share one count in Redis, when nothing says how they find each other (no
// LEAPCOUNT_JOIN or LEAPCOUNT_ADVERTISE, nor --join or --advertise after `ratelimit`):
// with REDIS_URL they list themselves there and join from that list (--join-redis,
// unless LEAPCOUNT_JOIN_REDIS is set: false keeps each replica a cluster of its own).
// Without Redis each replica is a cluster of one: its gossip and node-to-node ports
// listen on 127.0.0.1, on the ports LEAPCOUNT_GOSSIP and LEAPCOUNT_RPC name, whatever
// host they name. The image sets both to 0.0.0.0, which needs an advertised address (or
// --join-redis's); so the image runs in this mode with envoyproxy/ratelimit's variables
// alone (docker run, Envoy Gateway), and ports that serve no peer are not reachable from
// outside. A flag after `ratelimit` still beats these.
func replicaFlags(env func(string) (string, bool), args []string, redis bool) []string {
	if setBy(env, args, "join") || setBy(env, args, "advertise") || setBy(nil, args, "join-redis") {
		return nil
	}
	if v, _ := env("LEAPCOUNT_JOIN_REDIS"); v != "" {
		if isTrue(v) {
			return nil
		}
		redis = false
	}
	if redis {
		return []string{"--join-redis"}
	}
	var flags []string
	for _, name := range []string{"gossip", "rpc"} {
		v, _ := env("LEAPCOUNT_" + strings.ToUpper(name))
		if v == "" {
			continue // leapcount's default: 127.0.0.1 already
		}
		if _, port, err := net.SplitHostPort(v); err == nil {
			flags = append(flags, "--"+name+"="+net.JoinHostPort("127.0.0.1", port))
		}
	}
	return flags
}

// setBy reports whether the flag name is given after `ratelimit` or, when env is not
// nil, by its LEAPCOUNT_ variable.
func setBy(env func(string) (string, bool), args []string, name string) bool {
	if env != nil {
		if v, _ := env("LEAPCOUNT_" + strings.ToUpper(name)); v != "" {
			return true
		}
	}
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// isTrue reads a boolean variable as the flag package does.
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}
