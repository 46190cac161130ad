package cluster_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// names is a LookupHost whose answers a test changes as it goes, as DNS changes when
// pods come and go. A name it has no answer for does not resolve.
type names struct {
	mu      sync.Mutex
	records map[string][]string
	calls   atomic.Int64
}

func (n *names) set(host string, ips ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.records == nil {
		n.records = map[string][]string{}
	}
	n.records[host] = ips
}

func (n *names) lookup(_ context.Context, host string) ([]string, error) {
	n.calls.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if ips, ok := n.records[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// loners starts one member alone (no seeds) on each IP, all on the same gossip port,
// as pods of a StatefulSet are: a DNS name gives IPs, and the seed gives the one port.
func loners(t *testing.T, ips ...string) (port string, cs []*cluster.Cluster) {
	t.Helper()
	for range 5 { // another process may hold the port on one of the other IPs: pick again
		first := clustertest.Start(t, lonerConfig(t, ips[0], "0"))
		_, port, _ = net.SplitHostPort(first.LocalAddr())
		cs = []*cluster.Cluster{first}
		for _, ip := range ips[1:] {
			c, err := cluster.Start(lonerConfig(t, ip, port))
			if err != nil {
				break
			}
			t.Cleanup(func() { _ = c.Shutdown() })
			cs = append(cs, c)
		}
		if len(cs) == len(ips) {
			return port, cs
		}
		for _, c := range cs {
			_ = c.Shutdown()
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return "", nil
}

func lonerConfig(t *testing.T, ip, port string) cluster.Config {
	cfg := clustertest.Config(t, "m-"+ip)
	cfg.BindAddr = net.JoinHostPort(ip, port)
	return cfg
}

// A seed name with a record per member joins every one of them. The members start
// apart (none knows another), and the new one only joins once (no re-join), so the
// four can converge only if that one join reached all three.
func TestSeedNameJoinsEveryAddressItResolvesTo(t *testing.T) {
	port, cs := loners(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	var dns names
	dns.set("peers.test", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	cfg := clustertest.Config(t, "newcomer", "peers.test:"+port)
	cfg.LookupHost = dns.lookup
	cfg.RejoinInterval = -1
	c := clustertest.Start(t, cfg)
	clustertest.WaitConverged(t, deadline, append(cs, c)...)
}

// The name is resolved again at each re-join, so a member that appears in it later
// (a pod scheduled after this one started) is found, though nobody else knows it.
func TestSeedNameIsResolvedAgainAtEachRejoin(t *testing.T) {
	port, cs := loners(t, "127.0.0.2", "127.0.0.3")
	var dns names
	dns.set("peers.test", "127.0.0.2")
	cfg := clustertest.Config(t, "newcomer", "peers.test:"+port)
	cfg.LookupHost = dns.lookup
	c := clustertest.Start(t, cfg)
	clustertest.WaitConverged(t, deadline, cs[0], c)
	dns.set("peers.test", "127.0.0.2", "127.0.0.3")
	clustertest.WaitConverged(t, deadline, cs[0], cs[1], c)
}

// A seed name that does not resolve yet is no error at start: the member keeps trying
// it, and joins once it resolves.
func TestUnresolvedSeedNameIsTriedAgain(t *testing.T) {
	first := clustertest.Start(t, clustertest.Config(t, "first"))
	host, port, _ := net.SplitHostPort(first.LocalAddr())
	var dns names
	cfg := clustertest.Config(t, "later", "peers.test:"+port)
	cfg.LookupHost = dns.lookup
	c := clustertest.Start(t, cfg)
	waitLookups(t, &dns, 3)
	select {
	case <-c.Joined():
		t.Fatalf("joined while its only seed name resolved to nothing")
	default:
	}
	dns.set("peers.test", host)
	clustertest.WaitConverged(t, deadline, first, c)
}

// A name that lists only this member (a StatefulSet's first pod: the headless Service
// has its address alone) means there is nobody to join: the member is the first of its
// cluster, Joined at once, as with no seeds. The seed has no port: it takes the
// member's own gossip port, so it names exactly this member.
func TestSeedNameOfOnlyThisMemberIsTheFirst(t *testing.T) {
	var dns names
	dns.set("peers.test", "127.0.0.1")
	cfg := clustertest.Config(t, "first", "peers.test")
	cfg.LookupHost = dns.lookup
	c := clustertest.Start(t, cfg)
	select {
	case <-c.Joined():
	case <-time.After(deadline):
		t.Fatalf("not Joined %v after its only seed name resolved to itself", deadline)
	}
	if n := cluster.JoinFailures(c); n != 0 || dns.calls.Load() == 0 {
		t.Fatalf("%d failed joins, %d lookups; want 0 failures after a lookup", n, dns.calls.Load())
	}
}

// The system's resolver: "localhost" (from /etc/hosts) is a seed name like any other.
func TestSeedNameWithTheSystemResolver(t *testing.T) {
	first := clustertest.Start(t, clustertest.Config(t, "first"))
	_, port, _ := net.SplitHostPort(first.LocalAddr())
	c := clustertest.Start(t, clustertest.Config(t, "second", "localhost:"+port))
	clustertest.WaitConverged(t, deadline, first, c)
}

func waitLookups(t *testing.T, dns *names, n int64) {
	t.Helper()
	wait.For(t, deadline, func() error {
		if got := dns.calls.Load(); got < n {
			return fmt.Errorf("%d lookups; want %d", got, n)
		}
		return nil
	})
}
