package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/peerauth"
	"github.com/leapcount/leapcount/rpc"
)

func newGossipKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestOutsidersCannotUseTheClusterPlane attacks a keyed cluster of three node processes
// as an outsider would, with the node's own rpc client and by hand, and with rogue node
// processes. Nothing they send is decided, none of them joins, and the cluster keeps
// counting exactly.
func TestOutsidersCannotUseTheClusterPlane(t *testing.T) {
	key := newGossipKey(t)
	secured := []string{"--gossip-key", key, "--cluster-name", "prod"}
	c := proctest.StartCluster(t, 3, proctest.Options{Args: secured})
	const counted = "victim"
	hc := faultload.HTTPCounter{Addr: c.Node(0).HTTP(), Client: httpClient}
	incr(t, c, counted, 5)

	t.Run("rpc ops and handoffs", func(t *testing.T) {
		outsider := peerrpc.NewClient(rpc.Config{})
		defer outsider.Close()
		for _, n := range c.Nodes() {
			addr := n.Addrs().RPC
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res := make([]counter.Result, 1)
			err := outsider.Do(ctx, addr, rpc.Request[counter.Op]{Ops: []counter.Op{{Kind: counter.Incr, Key: counted, Window: 60_000, Buckets: 10, N: 1000}}}, res)
			if err == nil && res[0].Err == nil {
				t.Errorf("%s decided an outsider's increment: %+v", n.Name(), res[0])
			}
			huge := &owner.Handoff{From: "rogue", ID: 1, Counters: []owner.HandoffCounter{{Key: counted,
				Spec: leaparray.Spec{WindowMs: 60_000, Buckets: 1 << 31}}}}
			if err := (peerrpc.Handoffs{C: outsider}).Handoff(ctx, addr, huge); err == nil {
				t.Errorf("%s took an outsider's handoff", n.Name())
			}
			cancel()
		}
	})
	t.Run("64 MiB frame headers", func(t *testing.T) {
		// A length of 64 MiB, a request's type byte and the start of its body, on 16
		// connections at once per node.
		var wg sync.WaitGroup
		for _, n := range c.Nodes() {
			for i := 0; i < 16; i++ {
				wg.Go(func() { refusedAtOnce(t, n.Addrs().RPC, "\x04\x00\x00\x00\x01\x00\x01\x00\x00\x01\x01\x06victim") })
			}
		}
		wg.Wait()
	})
	t.Run("gossip garbage", func(t *testing.T) {
		junk := make([]byte, 1400)
		for _, n := range c.Nodes() {
			u, err := net.Dial("udp", n.Gossip())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 500; i++ {
				rand.Read(junk)
				junk[0] = byte(i) // every message type memberlist has, and more
				u.Write(junk)
			}
			u.Close()
			for i := 0; i < 20; i++ {
				rand.Read(junk)
				junk[0] = byte(i)
				refusedAtOnce(t, n.Gossip(), string(junk))
			}
		}
	})
	t.Run("rogue nodes", func(t *testing.T) {
		seed := c.Node(0).Gossip()
		rogues := map[string][]string{
			"rogue-no-key":    {"--join", seed},
			"rogue-wrong-key": {"--join", seed, "--gossip-key", newGossipKey(t), "--cluster-name", "prod"},
			"rogue-staging":   {"--join", seed, "--gossip-key", key, "--cluster-name", "staging"},
		}
		for name, args := range rogues {
			r := proctest.StartCluster(t, 0, proctest.Options{Args: append(args, "--name", name, "--log-level", "debug")})
			rogue := r.Add()
			// It has tried, and failed, to join twice by the time this returns. It never
			// becomes ready: a node given seeds serves once it has joined one.
			wait.For(t, 30*time.Second, func() error {
				b, err := os.ReadFile(rogue.LogPath())
				if n := strings.Count(string(b), `"msg":"join failed"`); err != nil || n < 2 {
					return fmt.Errorf("%s: %d failed joins (%v); want 2", name, n, err)
				}
				return nil
			})
			if v, err := rogue.View(); err != nil || !slices.Equal(v.Alive(), []string{name}) || v.Ready {
				t.Errorf("%s sees %v, ready %v (%v); want only itself, not ready", name, v.Alive(), v.Ready, err)
			}
		}
		want := []string{"node-0", "node-1", "node-2"}
		for _, n := range c.Nodes() {
			v, err := n.View()
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Alive(); !slices.Equal(got, want) {
				t.Errorf("%s sees members %v; want %v", n.Name(), got, want)
			}
			if s := v.Security; s.RPC != "key" || s.Gossip != "encrypted" || s.Cluster != "prod" || s.Refused == 0 {
				t.Errorf("%s reports security %+v; want rpc key, gossip encrypted, cluster prod, refusals counted", n.Name(), s)
			}
		}
	})
	c.WaitConverged()
	incr(t, c, counted, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes() {
		hc.Addr = n.HTTP()
		got, err := hc.Counts(ctx, []string{counted}, "1m")
		if err != nil || got[0] != 7 {
			t.Errorf("count through %s = %v (%v); want [7]", n.Name(), got, err)
		}
	}
	for _, n := range c.Nodes() {
		n.Stop() // fails the test if the process does not exit 0 in time
	}
}

// incr adds n to key through node 0, with a deadline.
func incr(t *testing.T, c *proctest.Cluster, key string, n int) {
	t.Helper()
	wait.For(t, 30*time.Second, func() error {
		resp, err := httpClient.Post("http://"+c.Node(0).HTTP()+"/v1/incr", "application/json",
			strings.NewReader(fmt.Sprintf(`{"key":%q,"window":"1m","n":%d}`, key, n)))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("incr: %d %s", resp.StatusCode, b)
		}
		return nil
	})
}

// refusedAtOnce sends what on a fresh connection to addr and checks the node closes it
// within a few seconds (the handshake's bound) without answering anything.
func refusedAtOnce(t *testing.T, addr, what string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	nc.Write([]byte(what))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s kept a connection open after %q", addr, what)
	}
	if len(b) > 0 {
		t.Errorf("%s answered %q to %q", addr, b, what)
	}
}

// TestMutualTLSCluster runs three node processes with certificates of one CA: they
// forward to each other and count exactly; a client with a certificate of another CA,
// or with none, decides nothing.
func TestMutualTLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "cluster")
	f := ca.Issue(t, dir, "member")
	c := proctest.StartCluster(t, 3, proctest.Options{Args: []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}})
	for i := 0; i < 20; i++ { // keys on every owner: most are forwarded from node 0
		incr(t, c, fmt.Sprintf("k%d", i), i+1)
	}
	foreign := certtest.NewCA(t, dir, "foreign").Issue(t, dir, "stranger")
	stranger, err := peerauth.New(peerauth.Config{CertFile: foreign.Cert, KeyFile: foreign.Key, CAFile: f.CA})
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	outsiders := map[string]*peerrpc.Client{
		"plain": peerrpc.NewClient(rpc.Config{}),
		"foreign CA": peerrpc.NewClient(rpc.Config{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return stranger.Client(ctx, nc)
		}}),
	}
	for name, cl := range outsiders {
		for _, n := range c.Nodes() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res := make([]counter.Result, 1)
			err := cl.Do(ctx, n.Addrs().RPC, rpc.Request[counter.Op]{Ops: []counter.Op{{Kind: counter.Incr, Key: "k0", Window: 60_000, Buckets: 10, N: 1000}}}, res)
			cancel()
			if err == nil && res[0].Err == nil {
				t.Errorf("%s: %s decided an outsider's increment", name, n.Name())
			}
		}
		cl.Close()
	}
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes() {
		got, err := faultload.HTTPCounter{Addr: n.HTTP(), Client: httpClient}.Counts(ctx, keys, "1m")
		if err != nil {
			t.Fatalf("counts through %s: %v", n.Name(), err)
		}
		for i, g := range got {
			if g != int64(i+1) {
				t.Errorf("count of %s through %s = %d; want %d", keys[i], n.Name(), g, i+1)
			}
		}
	}
}

// TestOpenRPCPortBoundsHostileFrames: a node with no cluster key takes anyone on its rpc
// port (docs/security.md), but what an outsider sends there still costs it little: 16
// connections that each declare a 64 MiB frame and send nothing more, and a handoff of a
// counter with 2^31 buckets, leave its memory where it was; it keeps answering, and
// stops on SIGTERM.
func TestOpenRPCPortBoundsHostileFrames(t *testing.T) {
	c := proctest.StartCluster(t, 1, proctest.Options{})
	n := c.Node(0)
	incr(t, c, "steady", 3)
	before, err := n.RSS()
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for i := 0; i < 16; i++ {
		nc, err := net.DialTimeout("tcp", n.Addrs().RPC, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// The introduction of a keyless peer, then the length of a 64 MiB request.
		nc.Write([]byte("LCPEER1\x01\x00\x00" + "\x04\x00\x00\x00\x01"))
		conns = append(conns, nc)
	}
	open, err := peerauth.New(peerauth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	outsider := peerrpc.NewClient(rpc.Config{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return open.Client(ctx, nc)
	}})
	defer outsider.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	huge := &owner.Handoff{From: "rogue", ID: 1, Counters: []owner.HandoffCounter{{Key: "steady",
		Spec: leaparray.Spec{WindowMs: 60_000, Buckets: 1 << 31}, Buckets: []leaparray.Bucket{{Index: 0, Count: 123456}}}}}
	if err := (peerrpc.Handoffs{C: outsider}).Handoff(ctx, n.Addrs().RPC, huge); err == nil {
		t.Error("the node took a handoff of a counter with 2^31 buckets")
	}
	incr(t, c, "steady", 4)
	got, err := faultload.HTTPCounter{Addr: n.HTTP(), Client: httpClient}.Counts(ctx, []string{"steady"}, "1m")
	if err != nil || got[0] != 7 {
		t.Errorf("count of steady = %v (%v); want [7]", got, err)
	}
	after, err := n.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RSS %d MiB before, %d MiB with 16 connections declaring 64 MiB frames", before>>20, after>>20)
	if after-before > 32<<20 {
		t.Errorf("RSS grew by %d MiB; want under 32 MiB (16 declared frames of 64 MiB must cost nothing)", (after-before)>>20)
	}
	for _, nc := range conns {
		nc.Close()
	}
	n.Stop()
}
