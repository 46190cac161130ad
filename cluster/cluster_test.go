package cluster_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// deadline for failure detection: FastTimings declares a node dead in about 2s.
const deadline = 10 * time.Second

func TestThreeMembersConverge(t *testing.T) {
	cs := clustertest.MakeCluster(t, 3)
	for _, c := range cs {
		select {
		case <-c.Joined():
		default:
			t.Errorf("%s: Joined not closed after converging", c.Name())
		}
		for _, m := range c.Members() {
			if m.State != cluster.StateAlive {
				t.Errorf("%s sees %s %s; want alive", c.Name(), m.Name, m.State)
			}
		}
	}
}

func TestMetadataVisibleToPeers(t *testing.T) {
	cs := clustertest.MakeCluster(t, 2)
	self := cs[1].Self()
	if self.RPCAddr != "node-1.rpc.test:7947" || self.Incarnation == 0 {
		t.Fatalf("got self %+v; want RPC addr node-1.rpc.test:7947 and an incarnation", self)
	}
	var seen cluster.Member
	for _, m := range cs[0].Members() {
		if m.Name == "node-1" {
			seen = m
		}
	}
	if seen.RPCAddr != self.RPCAddr || seen.Incarnation != self.Incarnation || seen.Addr != cs[1].LocalAddr() {
		t.Fatalf("node-0 sees %+v; want %+v at %s", seen, self, cs[1].LocalAddr())
	}
}

func TestGracefulLeave(t *testing.T) {
	cs := clustertest.MakeCluster(t, 3)
	drain(cs[0].Changes())
	if err := cs[2].Leave(2 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if err := cs[2].Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, c := range cs[:2] {
		clustertest.WaitState(t, deadline, c, "node-2", cluster.StateLeft)
	}
	clustertest.WaitConverged(t, deadline, cs[:2]...)
	select {
	case <-cs[0].Changes():
	default:
		t.Fatalf("no change signalled after a member left")
	}
}

func TestShutdownWithoutLeaveIsDead(t *testing.T) {
	cs := clustertest.MakeCluster(t, 3)
	if err := cs[2].Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, c := range cs[:2] {
		clustertest.WaitState(t, deadline, c, "node-2", cluster.StateDead)
	}
	clustertest.WaitConverged(t, deadline, cs[:2]...)
}

func TestMarkLeavingStopsServing(t *testing.T) {
	cs := clustertest.MakeCluster(t, 2)
	if err := cs[1].MarkLeaving(2 * time.Second); err != nil {
		t.Fatalf("mark leaving: %v", err)
	}
	clustertest.WaitState(t, deadline, cs[0], "node-1", cluster.StateLeaving)
	if got := len(cs[0].Alive()); got != 1 {
		t.Fatalf("got %d serving members; want 1", got)
	}
}

func TestRestartIsANewIncarnation(t *testing.T) {
	cs := clustertest.MakeCluster(t, 2)
	before := cs[1].Self()
	if err := cs[1].Leave(2 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	cs[1].Shutdown()
	clustertest.WaitState(t, deadline, cs[0], "node-1", cluster.StateLeft)
	again := clustertest.Start(t, clustertest.Config(t, "node-1", cs[0].LocalAddr()))
	clustertest.WaitConverged(t, deadline, cs[0], again)
	if got := again.Self().Incarnation; got == before.Incarnation {
		t.Fatalf("got the same incarnation %d after a restart; want a new one", got)
	}
}

func TestJoinRetryReachesLateSeed(t *testing.T) {
	seedAddr := clustertest.FreeAddr(t)
	late := clustertest.Start(t, clustertest.Config(t, "early", seedAddr))
	// Let it fail twice, so that the join below is a retry after backoff.
	wait.For(t, deadline, func() error {
		if n := cluster.JoinFailures(late); n < 2 {
			return fmt.Errorf("%d failed joins; want 2", n)
		}
		return nil
	})
	seedCfg := clustertest.Config(t, "seed")
	seedCfg.BindAddr = seedAddr
	seed := clustertest.Start(t, seedCfg)
	clustertest.WaitConverged(t, deadline, late, seed)
}

// Two clusters that never met: "b" has "a" as its seed but gave up joining before
// "a" existed, so only the periodic re-join can bring them together. That is the
// situation after a partition outlasting GossipToTheDeadTime: neither side has the
// other in memberlist's state any more.
func TestRejoinMergesSeparateClusters(t *testing.T) {
	aAddr := clustertest.FreeAddr(t)
	bCfg := clustertest.Config(t, "b-0", aAddr)
	bCfg.JoinRetry.Attempts = 1
	bCfg.RejoinInterval = 100 * time.Millisecond
	b0 := clustertest.Start(t, bCfg)
	<-cluster.InitialJoinDone(b0)
	b1 := clustertest.Start(t, clustertest.Config(t, "b-1", b0.LocalAddr()))
	clustertest.WaitConverged(t, deadline, b0, b1)

	aCfg := clustertest.Config(t, "a-0")
	aCfg.BindAddr = aAddr
	a0 := clustertest.Start(t, aCfg)
	a1 := clustertest.Start(t, clustertest.Config(t, "a-1", a0.LocalAddr()))
	clustertest.WaitConverged(t, deadline, a0, a1, b0, b1)
}

func TestNoRejoinWhenDisabled(t *testing.T) {
	aAddr := clustertest.FreeAddr(t)
	bCfg := clustertest.Config(t, "b", aAddr)
	bCfg.JoinRetry.Attempts = 1
	bCfg.RejoinInterval = -1
	b := clustertest.Start(t, bCfg)
	<-cluster.InitialJoinDone(b)
	aCfg := clustertest.Config(t, "a")
	aCfg.BindAddr = aAddr
	a := clustertest.Start(t, aCfg)
	// The control for the test above: give a re-join several chances to happen.
	// Waiting for a non-event needs a span of time; 1s is 10 re-join intervals of
	// the test above.
	if err := wait.Until(time.Second, func() error {
		if len(b.Members()) > 1 || len(a.Members()) > 1 {
			return nil
		}
		return fmt.Errorf("apart")
	}); err == nil {
		t.Fatalf("b and a met with re-joining off: %v, %v", b.Members(), a.Members())
	}
}

func TestChangesClosedByShutdown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Config(t, "solo"))
	c.Shutdown()
	drain(c.Changes())
	if _, open := <-c.Changes(); open {
		t.Fatalf("Changes still open after Shutdown")
	}
	if err := c.Leave(time.Second); err != cluster.ErrShutdown {
		t.Fatalf("Leave after Shutdown: got %v; want ErrShutdown", err)
	}
}

func TestFirstMemberIsJoinedAtOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Config(t, "first"))
	select {
	case <-c.Joined():
	default:
		t.Fatalf("a member without seeds is not Joined")
	}
	if got := c.LocalAddr(); got == "127.0.0.1:0" || got == "" {
		t.Fatalf("got LocalAddr %q; want the bound port", got)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// A member bound to one address dials its peers' gossip streams from it, so that they
// (and firewalls) see it come from where it gossips from.
func TestGossipStreamsLeaveFromTheBindAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept() // the join's push/pull stream
		if err == nil {
			got <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()
	c, err := cluster.Start(cluster.Config{Name: "m", BindAddr: "127.0.0.3:0", RPCAddr: "127.0.0.3:1", Join: []string{ln.Addr().String()},
		Logger: clustertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	select {
	case ip := <-got:
		if ip != "127.0.0.3" {
			t.Fatalf("stream came from %s; want 127.0.0.3", ip)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no join stream within 10s")
	}
}
