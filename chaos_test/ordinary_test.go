package chaos_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// ordinaryTries is how many times TestOrdinaryOperationsAnswerNoErrors runs its steps:
// LEAPCOUNT_ORDINARY_TRIES, or 1 (make soak runs 20).
func ordinaryTries() int {
	if v, err := strconv.Atoi(os.Getenv("LEAPCOUNT_ORDINARY_TRIES")); err == nil && v > 0 {
		return v
	}
	return 1
}

// The ordinary operations of README, tried as a new user would, under load, with the
// default timings: a fresh three-node cluster answers its very first requests (sent as
// soon as every /readyz is 200 and every /v1/cluster lists the three alive), a fourth
// node joins, leaves gracefully (clients leave it first, as README says), and every node
// is restarted in turn (a rolling restart). Not one request may fail or go unanswered.
// Tries alternate between a cluster with Redis and one without.
func TestOrdinaryOperationsAnswerNoErrors(t *testing.T) {
	s := seed(t)
	tries := ordinaryTries()
	failedTries := 0
	for try := 0; try < tries; try++ {
		redis := try%2 == 0
		ok := t.Run(strconv.Itoa(try), func(t *testing.T) { ordinaryOnce(t, s+uint64(try), redis) })
		if !ok {
			failedTries++
		}
	}
	t.Logf("%d of %d tries answered every request (Redis on even tries)", tries-failedTries, tries)
}

func ordinaryOnce(t *testing.T, s uint64, withRedis bool) {
	var args []string
	if withRedis {
		args = []string{"--redis", testredis.Start(t).URL()}
	}
	c := proctest.StartCluster(t, 3, proctest.Options{Args: args})
	g := faultload.New(faultload.Config{Keys: 500, Workers: 4, Seed: s, Rate: 800}, c.RESPAddrs()...)
	defer g.Close()
	step := func(name string, during func()) {
		t.Helper()
		from := g.Snapshot()
		g.Start(time.Minute, 1<<40)
		during()
		g.Stop()
		if acked, failed, unknown := g.Snapshot().Sub(from).Totals(); failed+unknown != 0 || acked == 0 {
			t.Errorf("%s: %d requests acknowledged, %d failed, %d unanswered; want none failed or unanswered (errors %v)",
				name, acked, failed, unknown, g.Errors())
		}
	}
	traffic := func(d time.Duration) func() { return func() { time.Sleep(d) } } // a span of traffic, not a wait

	step("first requests of a fresh cluster", traffic(time.Second))
	var n4 *proctest.Node
	step("a node joins", func() {
		n4 = c.Add()
		c.WaitConverged()
		g.SetAddrs(c.RESPAddrs()...)
		time.Sleep(time.Second) // traffic through the new node too
	})
	step("it leaves gracefully", func() { leave(t, c, g, n4) })
	for i := 0; i < 3; i++ {
		n := c.Node(i)
		step("rolling restart of "+n.Name(), func() {
			leave(t, c, g, n)
			n.Restart()
			c.WaitConverged()
			g.SetAddrs(c.RESPAddrs()...)
			time.Sleep(500 * time.Millisecond) // traffic through it again
		})
	}
}

// leave takes clients off n (as a load balancer does once its /readyz turns 503), stops
// it gracefully, and waits for the others to converge.
func leave(t *testing.T, c *proctest.Cluster, g *faultload.Gen, n *proctest.Node) {
	t.Helper()
	g.SetAddrs(others(c, n)...)
	if err := g.WaitIdle(n.RESP(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	c.WaitConverged()
}
