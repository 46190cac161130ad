// Command bench is `make bench`: it builds the node, starts its own redis-server and
// nodes on free loopback ports, drives every side with one load generator, and writes
// BENCHMARKS.md (machine, commands, tables, and the targets of issue 10 with the ratios
// measured in this run). -short is a quick check of the whole harness (under two
// minutes; its report goes to the temporary directory). Every process it starts is
// stopped when it ends, Ctrl-C included.
//
//	go run ./tools/cmd/bench [-short] [-out BENCHMARKS.md] [-skip 'per core,memory']
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/leapcount/leapcount/tools/benchharness"
)

func main() {
	short := flag.Bool("short", false, "quick check: fewer groups, one round, 100k counters")
	out := flag.String("out", "", `where the report goes ("-": standard output; default BENCHMARKS.md, or with -short `+
		`BENCHMARKS-short.md in the temporary directory, so a quick check never replaces the full report)`)
	skip := flag.String("skip", "", `comma-separated sections to leave out: "unpinned", "per core", "hotkey", "redis", "tls", "memory", "writebehind", "rls", "rlshot", "rlqs"`)
	rounds := flag.Int("rounds", 0, "rounds of each group (0: the mode's default)")
	duration := flag.Duration("duration", 0, "measured window of each measurement (0: the mode's default)")
	nodeBin := flag.String("node", "", "the node binary to run (default: build ./cmd/node into a temporary directory)")
	rlBin := flag.String("ratelimit", "", "envoyproxy/ratelimit's service binary, the baseline of ShouldRateLimit's rows (make bench builds it)")
	flag.Parse()

	if *out == "" {
		*out = "BENCHMARKS.md"
		if *short {
			*out = filepath.Join(os.TempDir(), "BENCHMARKS-short.md")
		}
	}
	o := benchharness.Defaults(*short)
	o.Log = os.Stderr
	o.NodeBin = *nodeBin
	o.RatelimitBin = *rlBin
	if *skip != "" {
		o.Skip = strings.Split(*skip, ",")
	}
	if *rounds > 0 {
		o.Rounds = *rounds
	}
	if *duration > 0 {
		o.Duration = *duration
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := benchharness.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	if err := write(*out, rep.Markdown()); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// write replaces path whole (a temporary file renamed), so an interrupted write leaves
// the previous report.
func write(path, text string) error {
	if path == "-" {
		_, err := os.Stdout.WriteString(text)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*.md")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s\n", path)
	return os.Rename(tmp.Name(), path)
}
