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
	"path/filepath"
	"strings"
	"syscall"

	"github.com/leapcount/leapcount/internal/buildinfo"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/peerauth"
)

func main() {
	os.Exit(dispatch(commandArgs(os.Args), os.LookupEnv, os.Stdout, os.Stderr))
}

// ratelimitPath is where envoyproxy/ratelimit's image has its binary (its entrypoint);
// leapcount's image links it to leapcount-node.
const ratelimitPath = "/bin/ratelimit"

// commandArgs is what dispatch reads of argv: the arguments after the program's name,
// with `ratelimit` first when the binary runs under the name ratelimit (the image's
// /bin/ratelimit: Envoy Gateway's Deployment and Istio's sample run that command) or is
// given /bin/ratelimit as its first argument (envoyproxy/ratelimit's compose example's
// `command: /bin/ratelimit`, which ours appends to its entrypoint), so that a deployment
// of envoyproxy/ratelimit runs `leapcount-node ratelimit` with only its image changed.
func commandArgs(argv []string) []string {
	switch {
	case len(argv) == 0:
		return nil
	case filepath.Base(argv[0]) == "ratelimit":
		return append([]string{"ratelimit"}, argv[1:]...)
	case len(argv) > 1 && argv[1] == ratelimitPath:
		return append([]string{"ratelimit"}, argv[2:]...)
	}
	return argv[1:]
}

// printVersion is the "version" subcommand (and --version): the binary's version,
// commit and Go, from the build information Go stamps into it, and the cluster protocol
// version it speaks (docs/operations.md, Upgrades).
func printVersion(w io.Writer) int {
	fmt.Fprintf(w, "%s cluster-protocol %d\n", buildinfo.Read(), peerauth.ProtocolVersion)
	return 0
}

// run parses args and the environment, starts the node and waits for a signal. It
// returns the exit code: 0 after a graceful stop, 1 if the node failed, 2 for bad flags.
func run(args []string, env func(string) (string, bool), stderr io.Writer) int {
	return runNode(args, env, stderr, nodeHooks{})
}

// nodeHooks let a mode of the binary (ratelimit) change the config the flags made and
// serve more beside the node; nil ones do nothing.
type nodeHooks struct {
	adjust func(*node.Config)
	// serve starts what runs beside n; its stop is called after the node stops.
	serve func(n *node.Node, logger *slog.Logger) (stop func(), err error)
}

// runNode is run with hooks.
func runNode(args []string, env func(string) (string, bool), stderr io.Writer, hooks nodeHooks) int {
	cfg, logOpts, err := parseFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "leapcount-node: %v\n", err)
		return 2
	}
	logger, err := logOpts.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "leapcount-node: %v\n", err)
		return 2
	}
	cfg.Logger = logger
	if hooks.adjust != nil {
		hooks.adjust(&cfg)
	}
	routeLibraryLogs(logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := node.Start(cfg)
	if err != nil {
		var cerr *node.ConfigError
		if errors.As(err, &cerr) {
			fmt.Fprintf(stderr, "leapcount-node: %v\n", err)
			return 2
		}
		logger.Error("node failed to start", "err", err)
		return 1
	}
	if hooks.serve != nil {
		stopBeside, err := hooks.serve(n, logger)
		if err != nil {
			fmt.Fprintf(stderr, "leapcount-node: %v\n", err)
			n.Stop(context.Background())
			return 2
		}
		defer stopBeside()
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
