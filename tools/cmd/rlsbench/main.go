// Command rlsbench is make bench-rls: Envoy's rate limit service, ShouldRateLimit with 1
// and 3 descriptors, on envoyproxy/ratelimit with its Redis and on leapcount clusters,
// measured by package tools/rlsbench; it prints the Markdown table.
//
//	go run ./tools/cmd/rlsbench -node bin/node [-ratelimit bin/ratelimit] [-nodes 1,3] [-instances 1,3] [-duration 10s] [-hot] [-profile dir]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leapcount/leapcount/tools/rlsbench"
)

func main() {
	var o rlsbench.Options
	flag.StringVar(&o.NodeBin, "node", "bin/node", "leapcount's node binary")
	flag.StringVar(&o.RatelimitBin, "ratelimit", "", "envoyproxy/ratelimit's service binary (empty: leapcount alone)")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "measured window of each row")
	flag.IntVar(&o.Workers, "workers", 32, "concurrent requests")
	flag.IntVar(&o.Values, "values", 10000, "distinct values of each descriptor key")
	flag.StringVar(&o.Domain, "domain", "bench", "the requests' domain: another than bench matches no rule, so nothing is counted or forwarded (experiments)")
	instances := flag.String("instances", "1,3", "envoyproxy/ratelimit deployments to measure: instances sharing one Redis, comma-separated")
	sizes := flag.String("nodes", "1,3", "leapcount cluster sizes to measure, comma-separated")
	flag.BoolVar(&o.TLS, "tls", true, "also measure the one-node cluster over --grpc-tls")
	flag.BoolVar(&o.Hot, "hot", false, "the hot profile: four calls in five on one of ten values")
	flag.StringVar(&o.ProfileDir, "profile", "", "write a CPU profile of each leapcount node for each row into this directory")
	nodeArgs := flag.String("node-args", "", "more flags for every node, space-separated (experiments)")
	flag.Parse()
	o.NodeArgs = strings.Fields(*nodeArgs)
	o.Sizes = counts("nodes", *sizes)
	o.Instances = counts("instances", *instances)
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := rlsbench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
	fmt.Print(rlsbench.Table(rows))
}

// counts parses flag name's comma-separated process counts, or exits.
func counts(name, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "rlsbench: -%s: %q is not a process count\n", name, f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}
