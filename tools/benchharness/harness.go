package benchharness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Options shape a run; Defaults gives those of `make bench` and `make bench-short`.
type Options struct {
	Short    bool
	Rounds   int           // rounds of each group (interleaved)
	Warmup   time.Duration // per measurement, before its window
	Duration time.Duration // per measurement: the window
	Conns    int           // connections of the load generator
	Seed     uint64        // key draws
	Skip     []string      // sections to leave out: "unpinned", "per core", "redis", "tls", "memory", "writebehind", "rls", "rlqs"
	NodeBin  string        // the node binary; empty: build ./cmd/node
	// RatelimitBin is envoyproxy/ratelimit's service binary, the baseline of the
	// "rls" section (empty: leapcount's rows alone, no ratios).
	RatelimitBin string
	Log          io.Writer // progress (nil: none)
}

// Defaults are the options of the full run, or of the short one.
func Defaults(short bool) Options {
	o := Options{Short: short, Rounds: 2, Warmup: 200 * time.Millisecond, Duration: 800 * time.Millisecond,
		Conns: 50, Seed: 1}
	if short {
		o.Rounds, o.Warmup, o.Duration = 1, 200*time.Millisecond, 500*time.Millisecond
	}
	return o
}

// harness holds what a run has started.
type harness struct {
	opts     Options
	plan     plan
	procs    *procs
	http     *http.Client
	nodeBin  string
	redisBin string
	runs     int // measurements so far: new keys of each get their own prefix
}

func newHarness(o Options) (*harness, error) {
	dir, err := os.MkdirTemp("", "leapcount-bench-")
	if err != nil {
		return nil, err
	}
	h := &harness{opts: o, plan: fullPlan(), procs: &procs{dir: dir},
		http: &http.Client{Timeout: 10 * time.Second}}
	if o.Short {
		h.plan = shortPlan()
	}
	if h.redisBin, err = findRedis(); err != nil {
		return h, err
	}
	if h.nodeBin = o.NodeBin; h.nodeBin != "" {
		return h, nil
	}
	h.logf("building the node into %s", dir)
	h.nodeBin = filepath.Join(dir, "leapcount-node")
	cmd := exec.Command("go", "build", "-trimpath", "-o", h.nodeBin, "github.com/leapcount/leapcount/cmd/node")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return h, fmt.Errorf("go build ./cmd/node: %v\n%s", err, out)
	}
	return h, nil
}

// close stops every process and removes the temporary directory.
func (h *harness) close() {
	h.procs.stopAll()
	os.RemoveAll(h.procs.dir)
}

func findRedis() (string, error) {
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("redis-server not found: run scripts/ensure-redis.sh (make bench does)")
}

func (h *harness) skip(section string) bool {
	for _, s := range h.opts.Skip {
		if s == section {
			return true
		}
	}
	return false
}

func (h *harness) logf(format string, args ...any) {
	if h.opts.Log != nil {
		fmt.Fprintf(h.opts.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }

// Run measures everything the plan holds and returns the report. Every process it
// started is stopped before it returns, whatever happened; cancelling ctx (Ctrl-C)
// stops the run.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	h, err := newHarness(o)
	defer h.close()
	if err != nil {
		return nil, err
	}
	rep := &Report{opts: o, machine: readMachine(h.redisBin)}
	for _, m := range h.plan.modes {
		if h.skip(m.name) {
			continue
		}
		if _, err := exec.LookPath("taskset"); m.pinned && err != nil {
			h.logf("no taskset (util-linux): the %s mode is left out", m.name)
			continue
		}
		groups, err := h.runMode(ctx, m)
		if err != nil {
			return nil, err
		}
		rep.groups = append(rep.groups, groups...)
	}
	if !h.skip("hotkey") {
		hot, err := h.runHotKey(ctx)
		if err != nil {
			return nil, err
		}
		rep.groups = append(rep.groups, hot...)
	}
	if !h.skip("redis") {
		if rep.redisGroups, err = h.runRedisGroups(ctx); err != nil {
			return nil, err
		}
	}
	if !h.skip("tls") {
		if rep.tls, err = h.runTLS(ctx); err != nil {
			return nil, err
		}
	}
	if !h.skip("memory") {
		if rep.loader, rep.mem, err = h.runMemory(ctx); err != nil {
			return nil, err
		}
	}
	if !h.skip("writebehind") && len(h.plan.mem) > 0 {
		if rep.wb, err = h.runWriteBehind(ctx, h.plan.mem[0]); err != nil {
			return nil, err
		}
	}
	if !h.skip("rls") {
		if rep.rls, err = h.runRLS(ctx); err != nil {
			return nil, err
		}
	}
	if !h.skip("rlshot") {
		if rep.rlsHot, rep.rlsHotPlain, err = h.runRLSHot(ctx); err != nil {
			return nil, err
		}
	}
	if !h.skip("rlqs") {
		if rep.rlqs, err = h.runRLQS(ctx); err != nil {
			return nil, err
		}
	}
	rep.elapsed = time.Since(start)
	rep.machine.LoadEnd = loadavg()
	return rep, nil
}
