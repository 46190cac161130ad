package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/leapcount/leapcount/node"
)

// healthcheck is the "healthcheck" subcommand: GET /readyz of the node on this host,
// exit 0 when it answers 200 and 1 otherwise. The node image is FROM scratch, with no
// shell or curl, so its container health check runs the node binary itself.
func healthcheck(args []string, env func(string) (string, bool), out io.Writer) int {
	fs := commandFlags("healthcheck", out)
	addr := fs.String("http", node.DefaultHTTPAddr, "the node's HTTP address (a wildcard host means this host)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parseQuietly(fs, args); err != nil {
		return parseExit(fs.Name(), err, out)
	}
	if v, ok := env(EnvName("http")); ok && !flagGiven(fs, "http") {
		*addr = v
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintf(out, "healthcheck: invalid --http %q: want host:port\n", *addr)
		return 2
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		fmt.Fprintf(out, "healthcheck: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(out, "healthcheck: not ready: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(out, "healthcheck: not ready: %d %s\n", resp.StatusCode, body)
		return 1
	}
	return 0
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
