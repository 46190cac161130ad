package faultload

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/history"
	"github.com/leapcount/leapcount/node/nodetest"
)

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

// A bounded run through both nodes of a cluster is counted exactly, read through
// either node over HTTP or RESP.
func TestRunIsCountedExactly(t *testing.T) {
	c := nodetest.MakeCluster(t, 2, nil)
	g := New(Config{Keys: 300, Workers: 4, Seed: seed(t)}, c.Nodes[0].RESPAddr(), c.Nodes[1].RESPAddr())
	defer g.Close()
	g.Start(time.Minute, 3000)
	st := g.Wait()
	if st.Sent != 3000 || st.Acked != 3000 {
		t.Fatalf("run: sent %d, acked %d (errors %v); want 3000 and 3000", st.Sent, st.Acked, g.Errors())
	}
	snap := g.Snapshot()
	if a, f, u := snap.Totals(); a != 3000 || f != 0 || u != 0 {
		t.Fatalf("totals: acked %d failed %d unknown %d; want 3000 0 0", a, f, u)
	}
	ctx := context.Background()
	for _, n := range c.Nodes {
		for _, counter := range []Counter{HTTPCounter{Addr: n.HTTPAddr()}, RESPCounter{Addr: n.RESPAddr()}} {
			r, _, err := Check(ctx, counter, snap, nil, g.Window())
			if err != nil {
				t.Fatal(err)
			}
			if r.Exact != 300 || r.Final != 3000 || !r.OK() {
				t.Fatalf("%s %T: %v; want 300 exact keys, final 3000", n.Name(), counter, r)
			}
		}
	}
	// A second run adds to the tallies; Sub isolates it.
	g.Start(time.Minute, 500)
	g.Wait()
	if a, _, _ := g.Snapshot().Sub(snap).Totals(); a != 500 {
		t.Fatalf("second run acked %d; want 500", a)
	}
}

// Stop ends a run early; the duration bounds it too.
func TestRunIsBounded(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	g := New(Config{Keys: 10, Workers: 2, Seed: seed(t), Rate: 200}, c.Nodes[0].RESPAddr())
	defer g.Close()
	g.Start(200*time.Millisecond, 1<<40)
	st := g.Wait()
	if st.Elapsed > 5*time.Second || st.Acked == 0 || st.Acked > 200 {
		t.Fatalf("200ms run at 200/s: %+v; want it to end soon with 1..200 acked", st)
	}
	g.Start(time.Hour, 1<<40)
	st = g.Stop()
	if st.Elapsed > 5*time.Second {
		t.Fatalf("Stop took %v", st.Elapsed)
	}
}

// A closed port fails requests (never sent); a server that never answers leaves them
// unknown.
func TestOutcomes(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accept and never answer
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	for _, tc := range []struct {
		addr                 string
		wantFailed, wantUnkn int64
	}{{closedAddr, 4, 0}, {silent.Addr().String(), 0, 4}} {
		g := New(Config{Keys: 4, Workers: 2, Seed: seed(t), Timeout: 100 * time.Millisecond}, tc.addr)
		g.Start(time.Minute, 4)
		st := g.Wait()
		g.Close()
		if st.Failed != tc.wantFailed || st.Unknown != tc.wantUnkn || st.Acked != 0 {
			t.Errorf("%s: %+v (errors %v); want failed %d unknown %d", tc.addr, st, g.Errors(), tc.wantFailed, tc.wantUnkn)
		}
	}
}

func TestCompare(t *testing.T) {
	tallies := Counts{Keys: []string{"a", "b", "c", "d"},
		Acked: []int64{5, 5, 5, 5}, Failed: []int64{0, 1, 1, 0}, Unknown: []int64{0, 1, 0, 0}}
	base := []int64{1, 1, 1, 1}
	// b's unknown op may have counted; c's failed op must not have.
	r := Compare([]int64{6, 7, 7, 4}, tallies, base)
	if r.Exact != 1 || r.Uncertain != 1 || r.ExtraKeys != 1 || r.Extra != 1 || r.LostKeys != 1 || r.Lost != 2 {
		t.Fatalf("got %+v; want exact 1, uncertain 1, extra 1 on 1 key, lost 2 on 1 key", r)
	}
	if r.Acked != 24 || r.Final != 24 || r.OK() {
		t.Fatalf("got acked %d final %d ok %v; want 24, 24, false", r.Acked, r.Final, r.OK())
	}
	if n, _ := Disagree(tallies.Keys, []int64{1, 2, 3, 4}, []int64{1, 2, 0, 4}); n != 1 {
		t.Fatalf("Disagree: got %d; want 1", n)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want outcome
	}{
		{nil, outcomeAcked},
		{replyErr("ERR counter unavailable: ownership is moving"), outcomeFailed},
		{replyErr("ERR outcome unknown: owner node-1 did not answer"), outcomeUnknown},
		{context.DeadlineExceeded, outcomeUnknown},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v): got %d; want %d", tc.err, got, tc.want)
		}
	}
}

// An SW.ALLOW reply with a negative count is the fail policy's: Unknown, and not an
// admission even when it allows.
func TestAllowOutcome(t *testing.T) {
	for _, tc := range []struct {
		vals    []int64
		err     error
		allowed bool
		want    history.Outcome
	}{
		{[]int64{1, 3, 2, 0}, nil, true, history.OK},
		{[]int64{0, 5, 0, 1000}, nil, false, history.OK},
		{[]int64{1, -1, -1, 0}, nil, false, history.Unknown},
		{[]int64{0, -1, -1, 1000}, nil, false, history.Unknown},
		{[]int64{1, 3}, nil, false, history.Unknown},
		{nil, replyErr("ERR counter unavailable: moving"), false, history.Failed},
		{nil, context.DeadlineExceeded, false, history.Unknown},
	} {
		if allowed, o := AllowOutcome(tc.vals, tc.err); allowed != tc.allowed || o != tc.want {
			t.Errorf("AllowOutcome(%v, %v): got %v, %d; want %v, %d", tc.vals, tc.err, allowed, o, tc.allowed, tc.want)
		}
	}
}

// replyErr is an error reply as go-redis returns one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// Allows count what they sent by outcome and what each key admitted.
func TestAllowsStatsAndAdmitted(t *testing.T) {
	c := nodetest.MakeCluster(t, 1, nil)
	a := NewAllows(AllowConfig{Keys: 2, Limit: 5, Workers: 2, Seed: seed(t), Pace: time.Millisecond}, c.Nodes[0].RESPAddr())
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	a.Run(ctx)
	st := a.Stats()
	if st.Sent <= 10 || st.Acked != st.Sent || st.Failed+st.Unknown != 0 {
		t.Fatalf("stats %+v; want more than 10 sent, every one answered", st)
	}
	adm := a.Admitted()
	if len(adm) != 2 {
		t.Fatalf("admitted %v; want 2 keys", adm)
	}
	for k, n := range adm {
		if n != 5 {
			t.Errorf("%s admitted %d; want its limit, 5", k, n)
		}
	}
}

// A request refused at the connection (a node that is down, which real clients leave)
// neither starts nor ends a key's outage: only the answers of the nodes reached say
// whether a counter could be counted. Through a live node and a closed port, no key is
// ever out.
func TestOutageLeavesOutUnreachedNodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	c := nodetest.MakeCluster(t, 1, nil)
	g := New(Config{Keys: 5, Workers: 2, Seed: seed(t)}, c.Nodes[0].RESPAddr(), closed)
	defer g.Close()
	g.Start(time.Minute, 400)
	st := g.Wait()
	if st.Failed == 0 || st.Acked == 0 {
		t.Fatalf("run: %+v; want some refused and some acknowledged", st)
	}
	if got := g.LongestOutage(); got != 0 {
		t.Fatalf("longest outage %v; want 0: every refusal was of the closed port", got)
	}
}
