package benchharness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/rlqs/rlqstest"
)

// The RLQS section's fleet: rlqsEnvoys simulated Envoys, each reporting one of
// rlqsBuckets buckets (a tenant) every rlqsInterval and making rlqsDemand requests a
// second, through three nodes.
const (
	rlqsEnvoys   = 100
	rlqsBuckets  = 10
	rlqsInterval = time.Second
	rlqsDemand   = 20
	rlqsRules    = "domain: bench\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 60000}\n"
)

// rlqsResult is what three nodes spent serving the fleet's reports.
type rlqsResult struct {
	span      time.Duration // measured
	intervals float64       // reporting intervals in span
	cpu       time.Duration // the three nodes' CPU in span
	idle      time.Duration // their CPU over as long with no Envoy, before
	admitted  int           // requests the Envoys admitted in span
	streams   int           // streams the Envoys opened in all
}

// runRLQS starts three nodes serving RLQS and rlqsEnvoys simulated Envoys streaming to
// them, spread evenly, and measures the nodes' CPU over the run after a warm-up.
func (h *harness) runRLQS(ctx context.Context) (*rlqsResult, error) {
	h.logf("rlqs: %d simulated Envoys, %d buckets, through three nodes", rlqsEnvoys, rlqsBuckets)
	dir, err := os.MkdirTemp("", "leapcount-bench-rlqs")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(rlqsRules), 0o644); err != nil {
		return nil, err
	}
	var grpcs []string
	nodes := make([]*nodeServer, 0, 3)
	for i := 0; i < 3; i++ {
		port, err := freeport.TCP()
		if err != nil {
			return nil, err
		}
		grpcs = append(grpcs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	started, err := h.startNodes("rlqs", 3, nodeOpts{each: func(i int) []string { return []string{"--grpc", grpcs[i], "--limits", rules} }})
	if err != nil {
		return nil, err
	}
	nodes = append(nodes, started...)
	defer func() {
		for _, n := range nodes {
			h.procs.stopSome(n.proc)
		}
	}()
	warm, span := 3*time.Second, 10*time.Second
	if h.opts.Short {
		span = 5 * time.Second
	}
	time.Sleep(time.Second) // the new processes settle
	idle0, i0 := nodesCPU(nodes), time.Now()
	time.Sleep(span)
	idle := time.Duration(float64(nodesCPU(nodes)-idle0) * span.Seconds() / time.Since(i0).Seconds())
	rec := rlqstest.NewAdmissions()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	envoys := make([]*rlqstest.Envoy, rlqsEnvoys)
	for i := range envoys {
		var addrs []string
		for j := range grpcs {
			addrs = append(addrs, grpcs[(i+j)%len(grpcs)])
		}
		e := &rlqstest.Envoy{Name: fmt.Sprintf("envoy-%d", i), Domain: "bench", Bucket: map[string]string{"tenant": fmt.Sprintf("t%d", i%rlqsBuckets)},
			Interval: rlqsInterval, Addrs: addrs, Record: rec}
		e.SetDemand(rlqsDemand)
		envoys[i] = e
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(ctx) }()
	}
	defer wg.Wait()
	time.Sleep(warm) // the streams open and the first assignments arrive
	cpu0, t0 := nodesCPU(nodes), time.Now()
	time.Sleep(span)
	r := &rlqsResult{span: time.Since(t0), cpu: nodesCPU(nodes) - cpu0}
	r.idle = time.Duration(float64(idle) * r.span.Seconds() / span.Seconds())
	r.intervals = r.span.Seconds() / rlqsInterval.Seconds()
	for _, e := range envoys {
		r.admitted += rec.Between(e.Name, t0, t0.Add(r.span))
	}
	cancel()
	wg.Wait()
	for _, e := range envoys {
		r.streams += e.Streams()
	}
	return r, nil
}

func nodesCPU(nodes []*nodeServer) time.Duration {
	var d time.Duration
	for _, n := range nodes {
		d += n.CPU()
	}
	return d
}

func (r *Report) rlqsSection() string {
	q := r.rlqs
	if q == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Envoy's Rate Limit Quota Service: 100 simulated Envoys\n\n")
	fmt.Fprintf(&b, "Three nodes serve RLQS (`--grpc`, one rule of 60,000 requests a minute per tenant); %d simulated Envoys "+
		"(package `rlqs/rlqstest`, in the benchmark's process) each stream to one of them, spread evenly, and report one of %d "+
		"tenants' buckets every %s while making %d requests a second, decided by the token buckets they are assigned. "+
		"Server CPU is the three nodes' over %s after a %s warm-up, less what the same nodes spent idle over as long just before "+
		"(gossip, leases: %s, shown in its own row); a reporting interval is %s.\n\n",
		rlqsEnvoys, rlqsBuckets, rlqsInterval, rlqsDemand, q.span.Round(time.Second), 3*time.Second, q.idle.Round(time.Millisecond), rlqsInterval)
	served := max(q.cpu-q.idle, 0)
	perInterval := time.Duration(float64(served) / q.intervals)
	perReport := perInterval / rlqsEnvoys
	b.WriteString(table([]string{"", "measured"}, [][]string{
		{"server CPU per reporting interval (all three nodes)", perInterval.Round(10 * time.Microsecond).String()},
		{"server CPU per report (one Envoy's, one bucket)", perReport.Round(100 * time.Nanosecond).String()},
		{"requests the Envoys admitted a second", fmt.Sprintf("%.0f", float64(q.admitted)/q.span.Seconds())},
		{"server CPU per admitted request", (time.Duration(float64(served) / max(float64(q.admitted), 1))).Round(10 * time.Nanosecond).String()},
		{"the same nodes idle, per reporting interval", time.Duration(float64(q.idle) / q.intervals).Round(10 * time.Microsecond).String()},
		{"streams opened (one per Envoy unless one broke)", fmt.Sprint(q.streams)},
	}))
	b.WriteString("\n")
	return b.String()
}
