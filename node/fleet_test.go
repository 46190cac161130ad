package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// sameVoters returns nil once every running node has the same voters, n of them, and
// the cluster has converged; it returns them in *got.
func sameVoters(c *nodetest.Cluster, n int, got *[]string) func() error {
	return func() error {
		if err := c.Converged(); err != nil {
			return err
		}
		first := c.Running()[0].Voters()
		for _, nd := range c.Running() {
			if v := nd.Voters(); len(v) != n || !slices.Equal(v, first) {
				return fmt.Errorf("%s has voters %v; want the same %d on every node", nd.Name(), v, n)
			}
		}
		*got = first
		return nil
	}
}

func isVoter(voters []string, nd *node.Node) bool { return slices.Contains(voters, nd.Name()) }

// TestAFleetKeepsFiveVoters: seven members keep five voters (lease.Config.Voters); the
// two others own partitions all the same, hold their leases, and send heartbeats to the
// five voters alone, answering none.
func TestAFleetKeepsFiveVoters(t *testing.T) {
	c := nodetest.MakeNetCluster(t, 7, nil)
	var voters []string
	wait.For(t, nodetest.Timeout, sameVoters(c, 5, &voters))
	before := map[string][2]uint64{}
	for _, nd := range c.Running() {
		s := nd.LeaseStats()
		before[nd.Name()] = [2]uint64{s.HeartbeatsSent, s.HeartbeatsHeard}
	}
	start := time.Now()
	wait.Until(3*time.Second, func() error { return fmt.Errorf("watching for %v", time.Since(start)) })
	span := time.Since(start)
	rounds := uint64(span/(time.Second/6)) + 3 // heartbeats every --lease/6, and a few kicked
	for _, nd := range c.Running() {
		s, b := nd.LeaseStats(), before[nd.Name()]
		sent, heard := s.HeartbeatsSent-b[0], s.HeartbeatsHeard-b[1]
		t.Logf("%s (voter %v): %d heartbeats sent, %d answered in %v", nd.Name(), isVoter(voters, nd), sent, heard, span.Round(time.Millisecond))
		peers := uint64(5) // the voters
		if isVoter(voters, nd) {
			peers = 4
		}
		if sent > peers*rounds {
			t.Errorf("%s sent %d heartbeats in %v; want at most %d (%d rounds to %d voters)", nd.Name(), sent, span, peers*rounds, rounds, peers)
		}
		if !isVoter(voters, nd) && heard != 0 {
			t.Errorf("%s, not a voter, answered %d heartbeats; want none", nd.Name(), heard)
		}
		if owned, held := nd.Holding(); owned == 0 || owned != held {
			t.Errorf("%s holds %d of the %d partitions it owns; want all, and some", nd.Name(), held, owned)
		}
	}
}

// TestFleetLosesAMemberThatIsNotAVoter: a member that is not a voter cut off from every
// other loses its partitions as its leases lapse, though gossip calls it alive: the
// other members that are not voters hear no heartbeat of it anyway, and learn it is
// silent from the voters' replies (lease.Keeper.Silent). The voters stay as they were.
func TestFleetLosesAMemberThatIsNotAVoter(t *testing.T) {
	c := nodetest.MakeNetCluster(t, 7, func(cfg *node.Config) {
		cfg.GossipTimings.ProbeInterval = time.Minute
		cfg.GossipTimings.ProbeTimeout = 30 * time.Second
	})
	var voters []string
	wait.For(t, nodetest.Timeout, sameVoters(c, 5, &voters))
	var others []*node.Node
	for _, nd := range c.Running() {
		if !isVoter(voters, nd) {
			others = append(others, nd)
		}
	}
	via, cut := others[0], others[1]
	movesOffWhenCut(t, c, via, cut, ownedBy(c, cut.Name(), 1)[0])
	if v := via.Voters(); !slices.Equal(v, voters) {
		t.Fatalf("voters changed from %v to %v as a member that is not one was cut off", voters, v)
	}
}

// TestFleetReplacesAVoterThatLeaves: a voter that leaves is dropped and a member that was
// not a voter takes its place: five voters again, one change at a time.
func TestFleetReplacesAVoterThatLeaves(t *testing.T) {
	c := nodetest.MakeNetCluster(t, 6, nil)
	var voters []string
	wait.For(t, nodetest.Timeout, sameVoters(c, 5, &voters))
	i := slices.IndexFunc(c.Running(), func(nd *node.Node) bool { return isVoter(voters, nd) })
	gone := c.Running()[i].Name()
	if err := c.Stop(i); err != nil {
		t.Fatalf("stop %s: %v", gone, err)
	}
	var after []string
	wait.For(t, nodetest.Timeout, sameVoters(c, 5, &after))
	if slices.Contains(after, gone) {
		t.Fatalf("voters %v still hold %s, which left", after, gone)
	}
}

// TestVotersSpreadOverZones: six members in three zones join zone by zone, the first
// three voters all of zone a: once c's member is there, the voters make room for it, and
// end of all three zones, no zone with more than two, so the loss of any one zone leaves
// a majority of them.
func TestVotersSpreadOverZones(t *testing.T) {
	zones := map[string]string{"node-0": "a", "node-1": "a", "node-2": "a", "node-3": "b", "node-4": "b", "node-5": "c"}
	c := nodetest.MakeNetCluster(t, 6, func(cfg *node.Config) { cfg.Zone = zones[cfg.Name] })
	var voters []string
	wait.For(t, nodetest.Timeout, sameVoters(c, 5, &voters))
	per := map[string]int{}
	for _, v := range voters {
		per[zones[v]]++
	}
	if err := wait.Until(nodetest.Timeout, func() error {
		var voters []string
		if err := sameVoters(c, 5, &voters)(); err != nil {
			return err
		}
		clear(per)
		for _, v := range voters {
			per[zones[v]]++
		}
		if per["a"] > 2 || per["b"] > 2 || per["c"] != 1 {
			return fmt.Errorf("voters %v, by zone %v; want c's member and at most two of a and of b", voters, per)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Running()[0].Cluster().Members() {
		if m.Zone != zones[m.Name] {
			t.Fatalf("gossip says %s is in zone %q; want %q", m.Name, m.Zone, zones[m.Name])
		}
	}
}
