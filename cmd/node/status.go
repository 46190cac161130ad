package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leapcount/leapcount/node"
)

// status is the "status" subcommand: the cluster as one node sees it, as tables, and
// the exit code scripts check: 0 when nothing is wrong, 1 when something is wrong or
// still settling (each named on the last lines: a deploy script waits for 0 as it
// would for a rollout), 2 for bad flags.
func status(args []string, env func(string) (string, bool), out io.Writer) int {
	fs := commandFlags("status", out)
	var a asker
	a.flags(fs)
	top := fs.Int("hot", 5, "hot keys to list")
	if err := parseQuietly(fs, args); err != nil {
		return parseExit(fs.Name(), err, out)
	}
	if err := a.resolve(fs, env); err != nil {
		fmt.Fprintf(out, "status: %v\n", err)
		return 2
	}
	var c node.ClusterView
	if err := a.get("/v1/cluster", &c); err != nil {
		fmt.Fprintf(out, "status: PROBLEM: node at %s: %v\n", a.addr, err)
		return 1
	}
	var hot node.HotKeysView
	hotErr := a.get("/v1/hotkeys?n="+strconv.Itoa(max(*top, 1)), &hot)
	writeStatus(out, &c, &hot, hotErr)
	for _, n := range c.Notes() {
		fmt.Fprintf(out, "NOTE: %s\n", n)
	}
	problems := c.Problems()
	for _, p := range problems {
		fmt.Fprintf(out, "PROBLEM: %s\n", p)
	}
	if len(problems) > 0 {
		return 1
	}
	fmt.Fprintln(out, "OK")
	return 0
}

func writeStatus(out io.Writer, c *node.ClusterView, hot *node.HotKeysView, hotErr error) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s\tversion %s\tready %v\tstatus %s\n", c.Self, c.Version, c.Ready, c.Status)
	fmt.Fprintf(tw, "ring\tepoch %s\t%d partitions\t\n", c.Epoch, c.Partitions)
	fmt.Fprintf(tw, "here\towns %d\tdecides %d\thanding on %d\tcounters %d\n", c.Owned, c.Held, c.HandingOn, c.Counters)
	redis := c.Redis
	if c.RedisReplicasBehind {
		redis += " (replicas behind: fewer than --redis-wait-replicas acknowledge writes)"
	}
	fmt.Fprintf(tw, "redis\t%s\tunwritten counters %d\twrite-behind lag %s\n", redis, c.Unwritten, time.Duration(c.LagMs)*time.Millisecond)
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tVERSION\tPARTITIONS\tLEASED\tVOTER\tGOSSIP")
	for _, m := range c.Members {
		v := m.Version
		if v == "" {
			v = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%s\n", m.Name, m.State, v, m.Partitions, m.Leased, m.Voter, m.Addr)
	}
	tw.Flush()
	fmt.Fprintln(out)
	if hotErr != nil {
		fmt.Fprintf(out, "hot keys: %v\n\n", hotErr)
		return
	}
	writeHotKeys(out, hot)
	fmt.Fprintln(out)
}

func writeHotKeys(out io.Writer, hot *node.HotKeysView) {
	fmt.Fprintf(out, "hot keys decided on %s (last %.0f s, one op in %d sampled)\n", hot.Node, float64(hot.SpanMs)/1000, hot.SampleEvery)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	// The range, not "± error": sampling makes it wide and lopsided for a key with few
	// samples (hotkeys/bounds.go).
	fmt.Fprintln(tw, "KEY\tOPS/S\tOPS\tTRUE OPS (99%)\tSLICED")
	for _, k := range hot.Keys {
		fmt.Fprintf(tw, "%q\t%.1f\t%d\t%d-%d\t%s\n", k.Key, k.PerSecond, k.Ops, k.Low, k.High, slicedMark(k.Sliced))
	}
	if len(hot.Keys) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t")
	}
	tw.Flush()
}

// slicedMark is a hot key's SLICED column: its limit is being sliced (lent, or held).
func slicedMark(sliced bool) string {
	if sliced {
		return "sliced"
	}
	return ""
}

// writeClusterHotKeys prints a cluster's merged hot keys, each with the members that
// decided it, and then the members whose keys are not in it.
func writeClusterHotKeys(out io.Writer, hot *node.ClusterHotKeysView) {
	fmt.Fprintf(out, "hot keys of %d members, merged by %s (last %.0f s, one op in %d sampled)\n", len(hot.Members), hot.Node, float64(hot.SpanMs)/1000, hot.SampleEvery)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tOPS/S\tOPS\tTRUE OPS (99%)\tDECIDED ON\tSLICED")
	for _, k := range hot.Keys {
		fmt.Fprintf(tw, "%q\t%.1f\t%d\t%d-%d\t%s\t%s\n", k.Key, k.PerSecond, k.Ops, k.Low, k.High, strings.Join(k.Nodes, ","), slicedMark(k.Sliced))
	}
	if len(hot.Keys) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t")
	}
	tw.Flush()
	for _, m := range hot.Missing {
		fmt.Fprintf(out, "not included: %s (%s)\n", m.Name, m.Reason)
	}
}

// hotkeysCmd is the "hotkeys" subcommand: the keys a node decided most often lately.
func hotkeysCmd(args []string, env func(string) (string, bool), out io.Writer) int {
	fs := commandFlags("hotkeys", out)
	var a asker
	a.flags(fs)
	n := fs.Int("n", 20, "keys to list (1 to 1000)")
	wide := fs.Bool("cluster", false, "every member's hot keys, merged: the node asked asks the others")
	if err := parseQuietly(fs, args); err != nil {
		return parseExit(fs.Name(), err, out)
	}
	if err := a.resolve(fs, env); err != nil {
		fmt.Fprintf(out, "hotkeys: %v\n", err)
		return 2
	}
	if *wide {
		var hot node.ClusterHotKeysView
		if err := a.get("/v1/hotkeys?scope=cluster&n="+strconv.Itoa(*n), &hot); err != nil {
			fmt.Fprintf(out, "hotkeys: %v\n", err)
			return 1
		}
		writeClusterHotKeys(out, &hot)
		return 0
	}
	var hot node.HotKeysView
	if err := a.get("/v1/hotkeys?n="+strconv.Itoa(*n), &hot); err != nil {
		fmt.Fprintf(out, "hotkeys: %v\n", err)
		return 1
	}
	writeHotKeys(out, &hot)
	return 0
}
