package benchharness

import (
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/leapcount/leapcount/tools/rlsbench"
)

// changes is the hand-written account of what was changed for speed and memory and
// why, with the figures that showed it paid; every report carries it after the targets.
//
//go:embed changes.md
var changes string

// figures is the hand-written list of the measurements behind design choices that
// code comments name by benchmark; every report carries it at the end.
//
//go:embed figures.md
var figures string

// Report is a run's figures; Markdown renders BENCHMARKS.md.
type Report struct {
	opts                Options
	machine             machine
	groups, redisGroups []*groupResult
	loader              loaderCheck
	mem                 []*memResult
	rls                 []rlsbench.Row
	rlsHot, rlsHotPlain []rlsbench.Row // the hot profile, with --slices (and the baseline) and without
	tls                 *tlsResult
	wb                  *wbResult
	rlqs                *rlqsResult
	elapsed             time.Duration
}

func (r *Report) group(id string) *groupResult {
	for _, g := range append(append([]*groupResult{}, r.groups...), r.redisGroups...) {
		if g.group.id == id {
			return g
		}
	}
	return nil
}

// Markdown is the whole report.
func (r *Report) Markdown() string {
	var b strings.Builder
	mode := "make bench (full)"
	if r.opts.Short {
		mode = "make bench-short (-short: fewer groups, one round, 100k counters)"
	}
	fmt.Fprintf(&b, "# leapcount benchmarks\n\nWritten by `%s` (tools/cmd/bench) on %s; the run took %s. Do not edit: run it again.\n\n",
		mode, r.machine.Date, r.elapsed.Round(time.Second))
	b.WriteString(r.machineSection())
	b.WriteString(r.targetsSection())
	b.WriteString(changes)
	b.WriteString(r.methodSection())
	b.WriteString(r.throughputSection())
	b.WriteString(r.tlsSection())
	b.WriteString(r.memorySection())
	b.WriteString(r.writeBehindSection())
	b.WriteString(r.rlsSection())
	b.WriteString(r.rlsHotSection())
	b.WriteString(r.rlqsSection())
	b.WriteString(figures)
	return b.String()
}

func (r *Report) machineSection() string {
	m := r.machine
	return "## Machine\n\n" + table([]string{"", ""}, [][]string{
		{"CPU", fmt.Sprintf("%s, %d cores", m.CPU, m.Cores)},
		{"memory", m.Memory},
		{"kernel", m.Kernel},
		{"Go", m.Go},
		{"redis-server", m.Redis},
		{"leapcount commit", m.Commit},
		{"load average (1, 5, 15 min) at start / end", m.Load + " / " + m.LoadEnd},
	}) + "\nThe machine is shared (other builds, tests and a Docker suite run on it), so absolute figures move " +
		"from run to run; the ratios compare sides measured back to back, interleaved, in the same run. Each table " +
		"gives the load average before and after it.\n\n"
}

func (r *Report) targetsSection() string {
	var rows [][]string
	for _, t := range r.targets() {
		rows = append(rows, []string{t.name, t.want, t.got, t.status})
	}
	return "## Targets (issues 10 and 24)\n\n" + table([]string{"target", "want", "measured", ""}, rows) + "\n"
}

func (r *Report) methodSection() string {
	o := r.opts
	var b strings.Builder
	b.WriteString("## How it measures\n\n")
	fmt.Fprintf(&b, "- One load generator for every side (`tools/loadgen`, in this process): %d connections, each "+
		"keeping 1 (unpipelined) or 16 requests in flight; latency is per operation, from the write of its batch to "+
		"the read of its reply (a log-linear histogram, 3%% precision).\n", o.Conns)
	fmt.Fprintf(&b, "- Each measurement: %s of warm-up, then a %s window; a group's sides are run one after the "+
		"other, %d round(s), the order reversed every other round; ops/s is the median (mean of two) of the rounds, "+
		"latency quantiles and CPU per op over all of them.\n", o.Warmup, o.Duration, o.Rounds)
	b.WriteString("- Server CPU per op: utime + stime of every server process of the side (/proc/<pid>/stat, " +
		"10 ms ticks) over the window, divided by the operations in it; generator CPU per op likewise " +
		"(getrusage of the harness).\n")
	fmt.Fprintf(&b, "- Unpinned: the OS places everything on the %d cores. Per core: servers on CPU %s "+
		"(`taskset -c %s`, nodes with `GOMAXPROCS=1`; the three nodes of a cluster share it), the generator on CPU %s "+
		"with one P.\n",
		r.machine.Cores, serverCPU, serverCPU, clientCPU)
	b.WriteString("- Counters: a 60 s window of 10 buckets; SW.ALLOW and /v1/allow with a limit of " + allowLimit +
		", never reached, so each request takes the admitting path. Every side has its own keys (prefix).\n\n")
	b.WriteString(commandsTable())
	return b.String()
}

func commandsTable() string {
	return "Processes and requests:\n\n" + table([]string{"what", "command"}, [][]string{
		{"harness", "`make bench` = `CGO_ENABLED=0 go build -trimpath -o bin/ ./tools/cmd/bench ./cmd/node && bin/bench -node bin/node` " +
			"(`go run ./tools/cmd/bench` builds the node itself); `make bench-short` adds `-short`"},
		{"node", "built with `CGO_ENABLED=0 go build -trimpath`, run as `node --name … --http … --resp … " +
			"--gossip … --rpc … --log-level warn --pprof --max-counters 30000000 [--join <the 3 gossip addresses>] [--redis redis://…]`"},
		{"redis-server", "`redis-server --port … --bind 127.0.0.1 --save '' --appendonly no --daemonize no --protected-mode no`"},
		{"per core", "`taskset -c 1` before each server, `GOMAXPROCS=1` for nodes; the harness pins itself with `taskset -a -p -c 0`"},
		{"Redis INCR", "`INCR <key>`"},
		{"Redis + Lua hash window", "`EVALSHA <tools/benchharness/lua/hashwindow.lua> 1 <key> <now ms> 60000 10 1`"},
		{"Redis + Lua sorted-set log", "`EVALSHA <tools/benchharness/lua/zsetlog.lua> 1 <key> <now ms> 60000 <now>-<seq>`"},
		{"leapcount RESP", "`SW.INCR <key> 60s`, `SW.ALLOW <key> 60s " + allowLimit + "`"},
		{"leapcount HTTP", "`POST /v1/incr {\"key\":…,\"window\":\"60s\"}`, `POST /v1/allow {\"key\":…,\"window\":\"60s\",\"limit\":" + allowLimit + "}`"},
	}) + "\n"
}

func (r *Report) throughputSection() string {
	var b strings.Builder
	b.WriteString("## Throughput, latency, CPU\n\n")
	for _, g := range append(append([]*groupResult{}, r.groups...), r.redisGroups...) {
		b.WriteString(groupTable(g))
	}
	return b.String()
}

func groupTable(g *groupResult) string {
	base := g.side(g.group.baseline)
	var rows [][]string
	for _, s := range g.sides {
		rows = append(rows, sideRow(s, base))
	}
	baseName := g.group.baseline
	if base != nil {
		baseName = base.side.name
	}
	return fmt.Sprintf("### %s\n\nload average %s before, %s after\n\n", g.group.title, g.loadBefore, g.loadEnd) +
		table([]string{"side", "ops/s", "rounds", "vs " + baseName, "p50", "p99", "p99.9", "server CPU/op", "generator CPU/op", "errors"}, rows) + "\n"
}

func sideRow(s, base *sideResult) []string {
	if s.failed != "" && s.ops == 0 {
		return []string{s.side.name, "failed: " + s.failed}
	}
	var rounds []string
	for _, x := range s.rates {
		rounds = append(rounds, fmtRate(x))
	}
	vs := "n/a"
	if base != nil {
		vs = fmtRatio(ratio(s.rate(), base.rate()))
	}
	errs := fmt.Sprint(s.errs)
	if s.firstErr != "" {
		errs += " (" + s.firstErr + ")"
	}
	return []string{s.side.name, fmtRate(s.rate()), strings.Join(rounds, " / "), vs,
		fmtDur(s.lat.Quantile(0.5)), fmtDur(s.lat.Quantile(0.99)), fmtDur(s.lat.Quantile(0.999)),
		fmtDur(s.cpuPerOp(s.serverCPU)), fmtDur(s.cpuPerOp(s.clientCPU)), errs}
}
