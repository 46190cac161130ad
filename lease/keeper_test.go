package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// directNet delivers heartbeats by calling the peer's Handle in this process, unless
// the link is cut.
type directNet struct {
	mu      sync.Mutex
	keepers map[string]*Keeper
	cut     map[string]bool
}

func (d *directNet) Exchange(ctx context.Context, addr string, req *Request) (*Reply, error) {
	d.mu.Lock()
	k, cut := d.keepers[addr], d.cut[addr] || d.cut[req.From]
	d.mu.Unlock()
	if k == nil || cut {
		return nil, errors.New("unreachable")
	}
	return k.Handle(req), nil
}

func TestKeepersRunConcurrently(t *testing.T) {
	net := &directNet{keepers: map[string]*Keeper{}, cut: map[string]bool{}}
	cfg := Config{Duration: 600 * time.Millisecond, Heartbeat: 50 * time.Millisecond}
	names := []string{"a", "b", "c"}
	var lapses atomic.Int32
	var ks []*Keeper
	for i, n := range names {
		k := NewKeeper(KeeperConfig{Config: cfg, Self: n, Incarnation: 1, Partitions: 4, Exchanger: net, Found: i == 0,
			OnLapse: func(s Set) { lapses.Add(int32(s.Len())) }})
		net.keepers[n] = k
		ks = append(ks, k)
	}
	var peers []Peer
	for _, n := range names {
		peers = append(peers, Peer{Name: n, Addr: n})
	}
	for _, k := range ks {
		k.SetView(View{Alive: names}, peers)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() { defer wg.Done(); k.Run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()

	ks[1].SetClaims(claim(4, 1))
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := ks[1].Wait(wctx, 1); err != nil {
		t.Fatalf("b never held partition 1 (voters %v): %v", ks[1].Voters(), err)
	}
	if err := wait.True(10*time.Second, func() bool { return len(ks[2].Voters()) == 3 }); err != nil {
		t.Fatalf("c has voters %v; want all three", ks[2].Voters())
	}
	net.mu.Lock()
	net.cut["b"] = true
	net.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for lapses.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b cut off, but no lapse reported")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	if ks[1].Holds(1, ks[1].now()) {
		t.Fatal("b still holds partition 1 after its lapse")
	}
	if err := wait.True(10*time.Second, func() bool { return !ks[1].Quorate(ks[1].now()) }); err != nil {
		t.Fatal("b, cut off from both others, still says it reaches a majority")
	}
	if !ks[0].Quorate(ks[0].now()) {
		t.Fatal("a, which reaches c, says it does not reach a majority")
	}
}

// TestKeeperRemembersOnlyMembers: heartbeats under names that are neither voters nor
// members seen alive (anyone who reaches the rpc port can send them) leave nothing
// behind, however many names they use, while members' are remembered.
func TestKeeperRemembersOnlyMembers(t *testing.T) {
	k := NewKeeper(KeeperConfig{Config: Config{Duration: time.Second}, Self: "a", Incarnation: 1, Partitions: 4, Found: true})
	k.SetView(View{Alive: []string{"a", "b"}}, nil)
	alive := make([]string, 1000)
	for i := range alive {
		alive[i] = fmt.Sprintf("m%d", i)
	}
	for i := 0; i < 5000; i++ {
		k.Handle(&Request{From: fmt.Sprintf("stranger-%d", i), Incarnation: 1, Round: 1, Alive: alive, Voters: []string{"x"}})
	}
	k.Handle(&Request{From: "b", Incarnation: 1, Round: 1})
	k.mu.Lock()
	heard, reports, latest := len(k.lastHeard), len(k.voters.reports), len(k.grantor.latest)
	k.mu.Unlock()
	if heard != 1 || k.LastHeard("b") == 0 {
		t.Fatalf("remembers heartbeats of %d names (b: %d); want only b's", heard, k.LastHeard("b"))
	}
	if reports != 0 {
		t.Fatalf("keeps %d voter reports from non-voters; want none", reports)
	}
	if latest > 1 {
		t.Fatalf("grantor remembers the rounds of %d senders; want at most the voter a", latest)
	}
}

// A lease granted by the replies to a round and run out before the next round began (the
// node froze right after the grant) is reported lapsed: before, lapses were found by
// comparing what each round saw held, and one that began and ended between two rounds
// was never reported, so its owner decided again from memory another node had moved on
// from (found by the cluster simulation).
func TestLapseOfALeaseHeldOnlyBetweenRounds(t *testing.T) {
	var now time.Duration
	var lapsed []Set
	cfg := Config{Duration: time.Second}
	mk := func(name string, found bool) *Keeper {
		k := NewKeeper(KeeperConfig{Config: cfg, Self: name, Incarnation: 1, Partitions: 4, Found: found,
			Clock: clockAt(&now), OnLapse: func(s Set) { lapsed = append(lapsed, s.Clone()) }})
		return k
	}
	a, b := mk("a", true), mk("b", false)
	now = 10 * time.Second // past b's grantor's quarantine
	for _, k := range []*Keeper{a, b} {
		k.voters.set, k.voters.version = map[string]bool{"a": true, "b": true}, 1
		k.SetView(View{Alive: []string{"a", "b"}}, nil)
	}
	a.SetClaims(claim(4, 2))
	req, _ := a.Begin() // p not held yet: a alone is no majority of two
	if a.Holds(2, now) {
		t.Fatal("a holds p before b granted it")
	}
	a.Absorb("b", req, b.Handle(req))
	if !a.Holds(2, now) {
		t.Fatal("a does not hold p after b granted it")
	}
	now += 2 * time.Second // frozen past the lease, no round in between
	a.Begin()
	if len(lapsed) == 0 || !lapsed[len(lapsed)-1].Has(2) {
		t.Fatalf("lapses reported: %v; want partition 2", lapsed)
	}
}

// A grant counts only toward the voter set its grantor answered under. A node back from
// a cut two voter changes late still asks under its old set, [a b c] here, and a voter
// of the new one, [a b c d e], grants what its own table has free: counted under the
// old set, a and b would be a majority while c, d and e (a majority of the new set)
// grant the partition to another node (sim seed 7025: two deciders).
func TestGrantUnderAnotherVoterSetDoesNotCount(t *testing.T) {
	for _, c := range []struct {
		voters  []string
		version uint64
		holds   bool
	}{
		{[]string{"a", "b", "c", "d", "e"}, 5, false},
		{[]string{"a", "b", "c"}, 3, true},
	} {
		var now time.Duration
		a := NewKeeper(KeeperConfig{Config: Config{Duration: time.Second}, Self: "a", Incarnation: 1, Partitions: 4,
			Clock: clockAt(&now)})
		now = 10 * time.Second // past a's grantor's quarantine
		a.voters.set, a.voters.version = map[string]bool{"a": true, "b": true, "c": true}, 3
		a.SetView(View{Alive: []string{"a", "b", "c"}}, nil)
		a.SetClaims(claim(4, 2))
		req, _ := a.Begin()
		a.Absorb("b", req, &Reply{Round: req.Round, Granted: claim(4, 2), Voters: c.voters, Version: c.version,
			Alive: []string{"a", "b", "c"}})
		if got := a.Holds(2, now); got != c.holds {
			t.Fatalf("b granted p under voters %v (version %d): a holds p %v; want %v", c.voters, c.version, got, c.holds)
		}
	}
}

// A claim refused only because a silent holder's grant still runs is retried as that
// grant runs out, not at the next heartbeat: RetryIn names the moment, just past the
// grant here (and not before, when the grantors would still refuse).
func TestClaimRetriedAsTheSilentHoldersGrantRunsOut(t *testing.T) {
	var now time.Duration
	cfg := Config{Duration: time.Second}
	ks := map[string]*Keeper{}
	for _, name := range []string{"a", "b", "c"} {
		k := NewKeeper(KeeperConfig{Config: cfg, Self: name, Incarnation: 1, Partitions: 4, Clock: clockAt(&now)})
		k.voters.set, k.voters.version = map[string]bool{"a": true, "b": true, "c": true}, 1
		k.SetView(View{Alive: []string{"a", "b", "c"}}, nil)
		ks[name] = k
	}
	a, b, c := ks["a"], ks["b"], ks["c"]
	now = 10 * time.Second // past every grantor's quarantine
	round := func(k *Keeper, to ...*Keeper) {
		req, _ := k.Begin()
		for _, g := range to {
			k.Absorb(g.cfg.Self, req, g.Handle(req))
		}
	}
	round(b, a) // b runs all along (a node that did not run counts no silence: Silent)
	c.SetClaims(claim(4, 2))
	round(c, a, b)
	if !c.Holds(2, now) {
		t.Fatal("c does not hold p after a majority granted it")
	}
	heardC := now
	if b.Silent("c", 0, now) || b.Silent("d", 0, now) || b.Silent("b", 0, now) {
		t.Fatal("silent right after a heartbeat, or for a member never heard, or for itself")
	}
	// c goes silent; b gains p and claims it half a lease later.
	for hb := cfg.WithDefaults().Heartbeat; now+hb <= heardC+cfg.Duration/2; {
		now += hb
		round(b, a)
	}
	now = heardC + cfg.Duration/2
	b.SetClaims(claim(4, 2))
	round(b, a)
	if b.Holds(2, now) {
		t.Fatal("b holds p while c's grant runs")
	}
	if _, ok := b.RetryIn(now); ok {
		t.Fatal("a retry asked for with c's grant running longer than a heartbeat")
	}
	free := heardC + cfg.WithDefaults().hold()                    // when b's and a's grants to c run out
	for hb := cfg.WithDefaults().Heartbeat; now+hb < free-hb/2; { // b's rounds go on
		now += hb
		round(b, a)
	}
	now = free - cfg.WithDefaults().Heartbeat/2
	round(b, a)
	d, ok := b.RetryIn(now)
	if !ok || now+d <= free {
		t.Fatalf("RetryIn = %v, %v at %v before c's grant runs out; want a round just after it", d, ok, time.Duration(free-now))
	}
	now += d
	if !b.Silent("c", 0, now) {
		t.Fatal("c not silent after a lease's length without a heartbeat")
	}
	if b.Silent("c", now-time.Millisecond, now) {
		t.Fatal("c silent though gossip saw it (re)appear a moment ago: it has had no time to heartbeat")
	}
	round(b, a)
	if !b.Holds(2, now) {
		t.Fatal("b does not hold p in the round RetryIn asked for")
	}
	if _, ok := b.RetryIn(now); ok {
		t.Fatal("a retry asked for with every claim granted")
	}
}

// A node that did not run for a while (frozen, starved) heard nobody meanwhile: its peers
// are not silent to it until a lease's length after it runs again, or it would leave
// them out of its ring at once and claim their partitions for nothing.
func TestPeersAreNotSilentToANodeThatWasFrozen(t *testing.T) {
	var now time.Duration
	cfg := Config{Duration: time.Second}
	a := NewKeeper(KeeperConfig{Config: cfg, Self: "a", Incarnation: 1, Partitions: 4, Found: true, Clock: clockAt(&now)})
	a.SetView(View{Alive: []string{"a", "b"}}, nil)
	now = 10 * time.Second
	a.Begin()
	a.Handle(&Request{From: "b", Incarnation: 1, Round: 1})
	now += 5 * time.Second // a frozen: no round, nothing heard
	if a.Silent("b", 0, now) {
		t.Fatal("b silent to a before a's first round after the freeze")
	}
	a.Begin()
	if a.Silent("b", 0, now) {
		t.Fatal("b silent to a right after a ran again")
	}
	for range 7 { // rounds go on, b answers none of them
		now += cfg.WithDefaults().Heartbeat
		a.Begin()
	}
	if !a.Silent("b", 0, now) {
		t.Fatal("b not silent after a ran a lease's length without hearing it")
	}
}

// A member silent to a node before that node froze stays silent through the freeze
// until it is heard again: the freeze excuses only the members that went quiet during
// it. Before, the frozen node took every member back into its ring as it ran again (its
// partitions moved to one that could not answer), then left it out a lease later; under
// load a partition so moved stayed undecided while its counters' Handoff to the silent
// member was in doubt (TestFleetLosesAMemberThatIsNotAVoter failed in make test).
func TestASilentPeerStaysSilentThroughAFreeze(t *testing.T) {
	var now time.Duration
	cfg := Config{Duration: time.Second}
	hb := cfg.WithDefaults().Heartbeat
	a := NewKeeper(KeeperConfig{Config: cfg, Self: "a", Incarnation: 1, Partitions: 4, Found: true, Clock: clockAt(&now)})
	a.SetView(View{Alive: []string{"a", "b", "c"}}, nil)
	now = 10 * time.Second
	a.Begin()
	a.Handle(&Request{From: "b", Incarnation: 1, Round: 1})
	round := uint64(1)
	for range 8 { // c answers every round, b none
		now += hb
		a.Begin()
		round++
		a.Handle(&Request{From: "c", Incarnation: 1, Round: round})
	}
	// The ring is built from Silent: a finds b silent before it freezes.
	if !a.Silent("b", 0, now) || a.Silent("c", 0, now) {
		t.Fatalf("before the freeze: b silent %v, c silent %v; want b alone", a.Silent("b", 0, now), a.Silent("c", 0, now))
	}
	now += 5 * time.Second // a frozen: no round, nothing heard
	if !a.Silent("b", 0, now) {
		t.Fatal("b, silent before a froze, not silent to a before a's first round after the freeze")
	}
	if a.Silent("c", 0, now) {
		t.Fatal("c, heard up to the freeze, silent to a before a's first round after it")
	}
	a.Begin()
	if !a.Silent("b", 0, now) {
		t.Fatal("b, silent before a froze, not silent to a right after a ran again")
	}
	if a.Silent("c", 0, now) {
		t.Fatal("c silent to a right after a ran again")
	}
	if got := a.silentNow; !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a's replies as a voter say %v silent; want [b]", got)
	}
	a.Handle(&Request{From: "b", Incarnation: 1, Round: 2})
	if a.Silent("b", 0, now) {
		t.Fatal("b still silent once a heard it again")
	}
}

// A member that left and restarted under its name: its new run's heartbeats may reach
// this node before gossip tells it that run is alive, while gossip still lists the
// member left. The run that left stays the run gossip says left: taking the run last
// heard for it made the new run look gone, so nothing was ever handed on to it.
func TestLeftRunIsTheRunGossipSaysLeft(t *testing.T) {
	k := NewKeeper(KeeperConfig{Config: Config{Duration: time.Second}, Self: "a", Incarnation: 1, Partitions: 4})
	k.voters = votersOf("a", "a", "b") // b is still a voter: its heartbeats are remembered
	k.Handle(&Request{From: "b", Incarnation: 7, Round: 1})
	left := View{Alive: []string{"a"}, Left: []string{"b"}, LeftRuns: map[string]uint64{"b": 7}}
	k.SetView(left, nil)
	k.Handle(&Request{From: "b", Incarnation: 8, Round: 1}) // b's next run
	k.SetView(left, nil)                                    // gossip has not seen it yet
	if got, run := k.LeftRun("b"), k.Incarnation("b"); got != 7 || run != 8 {
		t.Fatalf("b's left run %d, its run heard %d; want 7 (the run that left) and 8", got, run)
	}
	k.SetView(View{Alive: []string{"a", "b"}}, nil)
	if got := k.LeftRun("b"); got != 7 {
		t.Fatalf("b's left run %d once its next run is alive; want 7 still", got)
	}
}

// A node that missed heartbeat rounds (frozen, or starved of CPU) heard nobody meanwhile,
// through no fault of theirs: it does not say it cannot reach a majority before its own
// rounds have had a lease's length to hear them. Saying so at once failed clients' ops on
// a cluster that was fine (node TestMembershipChangesUnderLoad under make test: 3 of 1354
// answered unavailable). A node whose rounds nobody answers for a lease says so.
func TestAStarvedNodeDoesNotSayItIsCutOff(t *testing.T) {
	var now time.Duration
	cfg := Config{Duration: time.Second}
	hb := cfg.WithDefaults().Heartbeat
	a := NewKeeper(KeeperConfig{Config: cfg, Self: "a", Incarnation: 1, Partitions: 4, Clock: clockAt(&now)})
	a.voters = votersOf("a", "a", "b", "c")
	a.SetView(View{Alive: []string{"a", "b", "c"}}, nil)
	now = 10 * time.Second
	for round := uint64(1); round <= 8; round++ { // b answers every round, c none
		a.Begin()
		a.Handle(&Request{From: "b", Incarnation: 1, Round: round})
		now += hb
	}
	if !a.Quorate(now) {
		t.Fatal("a, which hears b, says it cannot reach a majority of a, b and c")
	}
	now += 3 * cfg.Duration // a starved: no round, nothing heard
	if !a.Quorate(now) {
		t.Fatal("a, starved, says it cannot reach a majority before its first round after")
	}
	woke := now
	for ; now-woke <= cfg.Duration; now += hb {
		a.Begin() // rounds nobody answers
		if !a.Quorate(now) {
			t.Fatalf("a says it cannot reach a majority %v after it ran again; want it to wait a lease (%v)", now-woke, cfg.Duration)
		}
	}
	a.Begin()
	if a.Quorate(now) {
		t.Fatalf("a, whose rounds nobody answered for %v, says it reaches a majority", now-woke)
	}
}

// A network whose every heartbeat takes longer than a heartbeat interval, though well
// within a lease (0.3 of it), still forms its voters and holds leases: a reply counts
// whenever it comes within a lease (its grants hold from when its round was sent). Given
// up after a heartbeat, every exchange failed: nobody held anything, and every node said
// it could not reach a majority. Past a quarter of a lease, two voters' ballots for the
// same change overtook each other for good (Voters.noteBallot).
func TestSlowHeartbeatsStillHoldLeases(t *testing.T) {
	cfg := Config{Duration: time.Second, Heartbeat: 100 * time.Millisecond}
	net := &slowNet{directNet: directNet{keepers: map[string]*Keeper{}, cut: map[string]bool{}}, delay: 3 * cfg.Heartbeat}
	names := []string{"a", "b", "c"}
	var ks []*Keeper
	var peers []Peer
	for i, n := range names {
		k := NewKeeper(KeeperConfig{Config: cfg, Self: n, Incarnation: 1, Partitions: 4, Exchanger: net, Found: i == 0})
		net.keepers[n] = k
		ks = append(ks, k)
		peers = append(peers, Peer{Name: n, Addr: n})
	}
	for _, k := range ks {
		k.SetView(View{Alive: names}, peers)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, k := range ks {
		wg.Add(1)
		go func() { defer wg.Done(); k.Run(ctx) }()
	}
	if err := wait.True(10*time.Second, func() bool { return len(ks[2].Voters()) == 3 }); err != nil {
		t.Fatalf("c has voters %v; want all three", ks[2].Voters())
	}
	ks[1].SetClaims(claim(4, 1))
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := ks[1].Wait(wctx, 1); err != nil {
		t.Fatalf("b never held partition 1 with heartbeats taking %v (voters %v): %v", net.delay, ks[1].Voters(), err)
	}
	for _, k := range ks {
		if !k.Quorate(k.now()) {
			t.Errorf("%s says it cannot reach a majority", k.cfg.Self)
		}
	}
}

// slowNet is directNet whose heartbeats take delay to arrive (one not delivered when its
// sender gave up first).
type slowNet struct {
	directNet
	delay time.Duration
}

func (s *slowNet) Exchange(ctx context.Context, addr string, req *Request) (*Reply, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.directNet.Exchange(ctx, addr, req)
}
