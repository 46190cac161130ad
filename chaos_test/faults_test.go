package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/history"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// faultCase is a fault test on real node processes: load (increments, allows under a
// limit, and Envoy's ShouldRateLimit under a rule of --limits) through every node while
// fault runs, then every node's counts are checked against what clients were told
// (packages faultload and history).
type faultCase struct {
	t      *testing.T
	c      *proctest.Cluster
	redis  *testredis.Server
	fw     *proctest.Firewall
	incrs  *faultload.Gen
	allows *faultload.Allows
	rls    *faultload.RLS
	cancel context.CancelFunc
	done   chan struct{}
}

// faultLimit is the limit of the allow keys and of the rate limit rule: what a fault
// that lets a counter start again from nothing may over-admit.
const faultLimit = 300

// faultRules is the --limits file of the fault tests: each user value may make
// faultLimit calls an hour.
var faultRules = fmt.Sprintf("domain: chaos\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", faultLimit)

// startFaultCase starts three nodes, each on its own loopback address, with fast
// failure detection, the node flags extra and, withRedis, a local redis-server, and
// starts the load.
func startFaultCase(t *testing.T, withRedis bool, extra ...string) *faultCase {
	s := seed(t)
	f := &faultCase{t: t, fw: proctest.NewFirewall(t)}
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(faultRules), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"--limits", rules}, fastDetection...), extra...)
	if withRedis {
		f.redis = testredis.Start(t)
		args = append(args, "--redis", f.redis.URL())
	}
	f.c = proctest.StartCluster(t, 3, proctest.Options{Args: args, OwnAddrs: true, GRPC: true})
	f.startLoads(s)
	return f
}

// startLoads starts the three loads through f.c's live nodes: increments, allows under
// faultLimit, and ShouldRateLimit under faultRules (domain chaos, key user).
func (f *faultCase) startLoads(s uint64) {
	f.done = make(chan struct{})
	f.incrs = faultload.New(faultload.Config{Keys: 500, Workers: 6, Seed: s, Rate: 2000, Timeout: 2 * time.Second}, f.c.RESPAddrs()...)
	f.allows = faultload.NewAllows(faultload.AllowConfig{Keys: 4, Limit: faultLimit, Workers: 2, Seed: s, Timeout: 2 * time.Second}, f.c.RESPAddrs()...)
	f.rls = faultload.NewRLS(faultload.RLSConfig{Domain: "chaos", Key: "user", Limit: faultLimit, Workers: 2, Seed: s}, f.c.GRPCAddrs()...)
	f.t.Cleanup(func() { f.incrs.Close(); f.allows.Close(); f.rls.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.incrs.Start(5*time.Minute, 1<<40)
	var loads sync.WaitGroup
	loads.Add(2)
	go func() { defer loads.Done(); f.allows.Run(ctx) }()
	go func() { defer loads.Done(); f.rls.Run(ctx) }()
	go func() { loads.Wait(); close(f.done) }()
}

// setAddrs sends the load through the cluster's live nodes (after one joined).
func (f *faultCase) setAddrs() { f.sendTo(f.c.Live()) }

// sendTo sends the load through nodes alone.
func (f *faultCase) sendTo(nodes []*proctest.Node) {
	var resp, grpc []string
	for _, n := range nodes {
		resp, grpc = append(resp, n.RESP()), append(grpc, n.GRPC())
	}
	f.incrs.SetAddrs(resp...)
	f.allows.SetAddrs(resp...)
	f.rls.SetAddrs(grpc...)
}

// run lets the load go on for d: a span of traffic, not a wait for a condition.
func (f *faultCase) run(d time.Duration) { time.Sleep(d) }

// finish stops the load, heals every cut, waits for the nodes to agree, and checks the
// counts through every node: incr keys exact within what clients could not know,
// allow keys within their limit plus overAdmit.
func (f *faultCase) finish(overAdmit int64) {
	t := f.t
	st := f.incrs.Stop()
	f.cancel()
	<-f.done
	if f.fw != nil {
		f.fw.Heal()
	}
	f.c.WaitConverged()
	tallies := f.incrs.Snapshot()
	var first []int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range f.c.Live() {
		counter := faultload.HTTPCounter{Addr: n.HTTP(), Client: httpClient}
		r, counts, err := faultload.Check(ctx, counter, tallies, nil, f.incrs.Window())
		if err != nil {
			t.Fatalf("check through %s: %v", n.Name(), err)
		}
		if !r.OK() {
			t.Errorf("through %s: %v", n.Name(), r)
		}
		if first == nil {
			first = counts
		} else if d, ex := faultload.Disagree(tallies.Keys, first, counts); d > 0 {
			t.Errorf("%s disagrees on %d keys, e.g. %v", n.Name(), d, ex)
		}
		s, err := f.allows.Check(ctx, counter, history.Bounds{OverAdmit: overAdmit})
		if err != nil {
			t.Fatalf("allow check through %s: %v", n.Name(), err)
		}
		if len(s.Violations) > 0 {
			t.Errorf("allow through %s: %v: %q", n.Name(), s, s.Violations)
		}
		rs, err := f.rls.Check(ctx, counter, "1h", history.Bounds{OverAdmit: overAdmit})
		if err != nil {
			t.Fatalf("ShouldRateLimit check through %s: %v", n.Name(), err)
		}
		if len(rs.Violations) > 0 {
			t.Errorf("ShouldRateLimit through %s: %v: %q", n.Name(), rs, rs.Violations)
		}
	}
	t.Logf("incr: %d acked, %d failed, %d unknown (%.0f/s); longest a key was unavailable: %v; errors: %q",
		st.Acked, st.Failed, st.Unknown, st.Rate(), f.incrs.LongestUnanswered().Round(time.Millisecond), f.incrs.Errors())
	t.Logf("ShouldRateLimit: calls by gRPC code %v; answered OK per value (limit %d): %v", f.rls.Codes(), faultLimit, f.rls.Admitted())
}

// A node cut off from the others stops deciding once its leases run out; its
// partitions move to the majority, which loads them from Redis with everything the cut
// node wrote before it stopped: nothing lost, nothing counted twice, no allow past its
// limit, and the cut node's clients get errors rather than answers from a minority.
func TestPartitionedNodeWithRedis(t *testing.T) {
	f := startFaultCase(t, true)
	f.run(2 * time.Second)
	f.fw.Isolate(f.c, f.c.Node(2))
	f.run(8 * time.Second)
	f.finish(0)
}

// Without Redis a partition cut off from its owner is decided afresh by its new owner,
// and the cut node's counts are handed back and added when the cut heals: nothing
// lost, nothing counted twice, and an allow may admit up to its limit again meanwhile
// (docs/guarantees.md).
func TestPartitionedNodeWithoutRedis(t *testing.T) {
	f := startFaultCase(t, false)
	f.run(2 * time.Second)
	f.fw.Isolate(f.c, f.c.Node(2))
	f.run(8 * time.Second)
	f.finish(300)
}

// An owner frozen past failure detection (SIGSTOP) loses its leases; its partitions
// move; on SIGCONT it writes what it had not and reloads before deciding again.
func TestFrozenOwnerPastDetection(t *testing.T) {
	f := startFaultCase(t, true)
	f.run(2 * time.Second)
	n := f.c.Node(1)
	n.Pause()
	f.run(10 * time.Second) // the fault is "frozen for 10 seconds": a duration
	n.Resume()
	f.run(3 * time.Second)
	f.finish(0)
}

// An owner whose replies are lost for 4 seconds (its requests still arrive): ops sent
// to it have an unknown outcome and are never decided again elsewhere.
func TestOwnerRepliesLost(t *testing.T) {
	f := startFaultCase(t, true)
	f.run(2 * time.Second)
	f.fw.DropReplies(f.c.Node(1))
	f.run(4 * time.Second)
	f.fw.Heal()
	f.run(3 * time.Second)
	f.finish(0)
}

// A node joins while Redis is down: the partitions that move to it cannot go through
// Redis, so their counters go to it directly; nothing is lost, then or after Redis
// returns.
func TestJoinWhileRedisDown(t *testing.T) {
	joinWhileRedisDown(startFaultCase(t, true))
}

// joinWhileRedisDown is TestJoinWhileRedisDown's fault and check on f.
func joinWhileRedisDown(f *faultCase) {
	f.run(2 * time.Second)
	f.redis.Pause()
	f.run(time.Second)
	f.c.Add()
	f.c.WaitConverged()
	f.setAddrs()
	f.run(3 * time.Second)
	f.redis.Resume()
	f.run(3 * time.Second)
	f.finish(0)
}

// With one partition a slot (--partitions 16384) the faults above end the same: a node
// cut off stops deciding once its leases run out and the majority loads its partitions
// from Redis, and a node that joins while Redis is down takes its counters directly;
// nothing lost, nothing counted twice, no allow past its limit.
func TestFaultsWithOnePartitionASlot(t *testing.T) {
	t.Run("partitioned node with Redis", func(t *testing.T) {
		f := startFaultCase(t, true, "--partitions", "16384")
		f.run(2 * time.Second)
		f.fw.Isolate(f.c, f.c.Node(2))
		f.run(8 * time.Second)
		f.finish(0)
	})
	t.Run("join while Redis is down", func(t *testing.T) {
		joinWhileRedisDown(startFaultCase(t, true, "--partitions", "16384"))
	})
}
