package chaos_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// envoyproxy/ratelimit's deployment shape (docs/kubernetes.md, "A Deployment behind one
// Service"): replicas of `leapcount-node ratelimit`, configured by its variables alone and
// sharing nothing but Redis, with no join list and no headless Service, find each other
// through Redis and form one cluster. The Deployment scales from two replicas to four
// and back to two under load (increments, allows and ShouldRateLimit through every
// replica; a replica scaled down is taken off the load as it gets SIGTERM, as a Service
// drops a terminating pod): no count is lost or counted twice (acked ≤ final ≤ acked +
// unknown through every replica), and no limit admits more than it allows.
func TestRatelimitReplicasScaleUnderLoad(t *testing.T) {
	s := seed(t)
	srv := testredis.Start(t)
	root := t.TempDir()
	config := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(config, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "rules.yaml"), []byte(faultRules), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + srv.Addr(), "USE_STATSD=false", "LOG_LEVEL=info",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		// The checks read counts over HTTP as sliding windows; fixed ones would start
		// again at each hour's turn.
		"LEAPCOUNT_SLIDING_WINDOWS=true"}
	f := &faultCase{t: t, redis: srv}
	f.c = proctest.StartCluster(t, 2, proctest.Options{Ratelimit: true, NoJoin: true, GRPC: true, Env: env})
	f.startLoads(s)
	f.run(2 * time.Second)
	for range 2 {
		f.c.Add()
		f.c.WaitConverged()
		f.setAddrs()
		f.run(2 * time.Second)
	}
	for _, i := range []int{0, 2} { // the first replica (it founded the cluster), then another
		n := f.c.Node(i)
		f.sendTo(slices.DeleteFunc(f.c.Live(), func(m *proctest.Node) bool { return m == n }))
		n.Stop()
		f.c.WaitConverged()
		f.run(2 * time.Second)
	}
	f.finish(0)
}
