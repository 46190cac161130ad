package benchharness

import (
	"context"
	"fmt"
	"strings"

	"github.com/leapcount/leapcount/tools/rlsbench"
)

// runRLS measures Envoy's rate limit service (package rlsbench): envoyproxy/ratelimit
// with its Redis when the run has its binary, and leapcount on one node and three.
func (h *harness) runRLS(ctx context.Context) ([]rlsbench.Row, error) {
	o := rlsbench.Options{NodeBin: h.nodeBin, RatelimitBin: h.opts.RatelimitBin, Log: h.opts.Log, TLS: true}
	if h.opts.Short {
		o.Warmup, o.Duration = h.opts.Warmup, 2*h.opts.Duration
	}
	h.logf("rls: ShouldRateLimit, envoyproxy/ratelimit %q against leapcount", h.opts.RatelimitBin)
	return rlsbench.Run(ctx, o)
}

// runRLSHot measures ShouldRateLimit with a hot profile (80% of calls on 10
// descriptors, issue 45): envoyproxy/ratelimit's single instance and three nodes with
// --slices, then three nodes without.
func (h *harness) runRLSHot(ctx context.Context) (sliced, plain []rlsbench.Row, err error) {
	o := rlsbench.Options{NodeBin: h.nodeBin, RatelimitBin: h.opts.RatelimitBin, Log: h.opts.Log, Hot: true,
		Sizes: []int{3}, Instances: []int{1}, NodeArgs: []string{"--slices"}, Label: ", --slices"}
	if h.opts.Short {
		o.Warmup, o.Duration = h.opts.Warmup, 2*h.opts.Duration
	}
	h.logf("rls, hot profile: envoyproxy/ratelimit %q against three nodes with and without --slices", h.opts.RatelimitBin)
	if sliced, err = rlsbench.Run(ctx, o); err != nil {
		return nil, nil, err
	}
	o.RatelimitBin, o.NodeArgs, o.Label = "", nil, ", no slices"
	plain, err = rlsbench.Run(ctx, o)
	return sliced, plain, err
}

// rlsHotSection is the hot profile's tables.
func (r *Report) rlsHotSection() string {
	if len(r.rlsHot) == 0 {
		return ""
	}
	return "### ShouldRateLimit with a hot profile\n\n" +
		"The same, but four calls in five carry one of ten hot values (every descriptor key of a call the same value), " +
		"the fifth one of 10,000: leapcount's three nodes with `--slices` (a node forwarding a hot counter's hits often " +
		"decides them from a slice of its limit), against envoyproxy/ratelimit's single instance, then three nodes " +
		"without slices.\n\n" + rlsbench.Table(r.rlsHot) + "\n" + rlsbench.Table(r.rlsHotPlain) + "\n"
}

func (r *Report) rlsSection() string {
	if len(r.rls) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Envoy's rate limit service: ShouldRateLimit against envoyproxy/ratelimit\n\n")
	b.WriteString("Package `tools/rlsbench` (also `make bench-rls` alone): envoyproxy/ratelimit's service, built by " +
		"`scripts/ensure-ratelimit.sh` from the pinned module, with its own redis-server (one instance, and three " +
		"sharing that Redis, as it is scaled out), then leapcount on one node and on three, all on this machine. One load generator: 32 concurrent `ShouldRateLimit` calls over two gRPC " +
		"connections per server, spread over the nodes, 10,000 distinct values per descriptor key, limits never " +
		"reached. Server CPU is every server process's, Redis included; the ratio is requests per server CPU-second " +
		"over envoyproxy/ratelimit's single instance with as many descriptors, in this run (issue 24's target), " +
		"and the last column the same over as many instances as leapcount has nodes. Both read the same config file " +
		"(leapcount with its default sliding windows). The one-node cluster is measured again over its `--grpc-tls` port " +
		"(TLS 1.3, no client certificate): its row gives its requests per CPU-second against the same node's plaintext row.\n\n")
	if r.opts.RatelimitBin == "" {
		b.WriteString("envoyproxy/ratelimit was not measured in this run (no -ratelimit binary): no ratios.\n\n")
	}
	b.WriteString(rlsbench.Table(r.rls))
	b.WriteString("\n")
	return b.String()
}

// rlsTargets: issue 24's 5x envoyproxy/ratelimit's requests per CPU-second, on one node
// and through three, with 1 and 3 descriptors.
func (r *Report) rlsTargets() []targetRow {
	var rows []targetRow
	for _, nodes := range []int{1, 3} {
		for _, d := range []int{1, 3} {
			row := targetRow{name: fmt.Sprintf("ShouldRateLimit, %d descriptor(s), leapcount on %d node(s): requests per server CPU-second vs envoyproxy/ratelimit + Redis", d, nodes),
				want: "≥ 5x", got: notMeasured, status: "-"}
			if x, ok := rlsbench.Ratio(r.rls, nodes, d); ok {
				row.got, row.status = fmtRatio(x), pass(x >= 5)
			}
			rows = append(rows, row)
		}
	}
	for _, d := range []int{1, 3} {
		row := targetRow{name: fmt.Sprintf("ShouldRateLimit, hot profile (80%% of calls on 10 descriptors), %d descriptor(s), three nodes with --slices: requests per server CPU-second vs envoyproxy/ratelimit + Redis", d),
			want: "≥ 5x", got: notMeasured, status: "-"}
		if x, ok := rlsbench.Ratio(r.rlsHot, 3, d); ok {
			row.got, row.status = fmtRatio(x), pass(x >= 5)
		}
		rows = append(rows, row,
			rlsRateTarget(fmt.Sprintf("ShouldRateLimit through three nodes, %d descriptor(s): hot profile with --slices vs spread values (the section above)", d), r.rlsHot, r.rls, d, 1.2),
			rlsRateTarget(fmt.Sprintf("ShouldRateLimit through three nodes, %d descriptor(s), hot profile: --slices vs no slices", d), r.rlsHot, r.rlsHotPlain, d, 1.0))
	}
	return rows
}

// rlsRateTarget compares the requests a second of three nodes' rows with d descriptors
// in two sets of rows.
func rlsRateTarget(name string, a, b []rlsbench.Row, d int, min float64) targetRow {
	row := targetRow{name: name, want: fmt.Sprintf("≥ %.1fx", min), got: notMeasured, status: "-"}
	x, okA := rlsbench.Find(a, 3, d)
	y, okB := rlsbench.Find(b, 3, d)
	if !okA || !okB || y.Rate == 0 {
		return row
	}
	q := x.Rate / y.Rate
	row.got = fmt.Sprintf("%s (%s vs %s requests/s)", fmtRatio(q), fmtRate(x.Rate), fmtRate(y.Rate))
	row.status = pass(q >= min)
	return row
}
