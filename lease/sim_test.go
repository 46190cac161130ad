package lease

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// sim runs keepers against each other in one goroutine, with a manual clock and a
// network that cuts links and delays replies: the etcd-raft style of test, every step
// chosen by a seeded random source.
type sim struct {
	t       *testing.T
	now     time.Duration
	names   []string
	keepers []*Keeper
	cut     map[[2]int]bool
	late    []lateReply
	rng     *rand.Rand
	sent    int  // heartbeats sent
	prompt  bool // every reply arrives at once
}

type lateReply struct {
	at   time.Duration
	to   int
	from string
	req  *Request
	rep  *Reply
}

func newSim(t *testing.T, n, partitions int, seed uint64) *sim {
	return newFleet(t, n, n, partitions, seed)
}

// newFleet is newSim with the first voters nodes the voters, the rest members that are
// not.
func newFleet(t *testing.T, n, voters, partitions int, seed uint64) *sim {
	s := &sim{t: t, cut: map[[2]int]bool{}, rng: rand.New(rand.NewPCG(seed, 0))}
	cfg := Config{Duration: time.Second, Heartbeat: 150 * time.Millisecond}
	if voters < n {
		cfg.Voters = voters // (else the voters would grow to their default number)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i)
		s.names = append(s.names, name)
		k := NewKeeper(KeeperConfig{Config: cfg, Self: name, Incarnation: 1, Partitions: partitions,
			Found: i == 0, Clock: clockAt(&s.now)})
		s.keepers = append(s.keepers, k)
	}
	var peers []Peer
	for _, name := range s.names {
		peers = append(peers, Peer{Name: name, Addr: name})
	}
	for _, k := range s.keepers {
		k.voters.set, k.voters.version = map[string]bool{}, 1 // one set, at one version on every node
		for _, name := range s.names[:voters] {
			k.voters.set[name] = true
		}
		k.view, k.peers = View{Alive: s.names}, peers
	}
	s.now = 10 * time.Second // past the grantors' quarantine
	return s
}

func (s *sim) linked(a, b int) bool { return !s.cut[[2]int{min(a, b), max(a, b)}] }

// round runs node i's heartbeat round: peers it can reach answer at once; their replies
// arrive at once or later.
func (s *sim) round(i int) {
	k := s.keepers[i]
	req, targets, _ := k.begin(k.wall())
	s.sent += len(targets)
	for _, p := range targets {
		j := s.index(p.Name)
		other := s.keepers[j]
		if !s.linked(i, j) {
			continue
		}
		rep := other.Handle(req)
		if !s.prompt && s.rng.IntN(4) == 0 {
			s.late = append(s.late, lateReply{at: s.now + time.Duration(s.rng.IntN(2000))*ms, to: i, from: s.names[j], req: req, rep: rep})
			continue
		}
		k.Absorb(s.names[j], req, rep)
	}
}

func (s *sim) deliver() {
	kept := s.late[:0]
	for _, l := range s.late {
		if l.at <= s.now {
			if s.linked(l.to, s.index(l.from)) {
				s.keepers[l.to].Absorb(l.from, l.req, l.rep)
			}
			continue
		}
		kept = append(kept, l)
	}
	s.late = kept
}

func (s *sim) index(name string) int {
	for i, n := range s.names {
		if n == name {
			return i
		}
	}
	return -1
}

// check fails the test if two nodes hold one partition at once.
func (s *sim) check(step int, partitions int) {
	for p := 0; p < partitions; p++ {
		holder := -1
		for i, k := range s.keepers {
			if s.now < k.holder.Until(p) {
				if holder >= 0 {
					s.t.Fatalf("step %d, t=%dms: partition %d held by %s (until %d) and %s (until %d)", step, s.now/ms, p,
						s.names[holder], s.keepers[holder].holder.Until(p)/ms, s.names[i], k.holder.Until(p)/ms)
				}
				holder = i
			}
		}
	}
}

// TestRandomizedAtMostOneHolder drives five nodes whose claims disagree (each claims by
// its own, randomly stale, placement), through cuts, heals and late replies, and
// checks after every step that no partition has two holders.
func TestRandomizedAtMostOneHolder(t *testing.T) {
	t.Run("all voters", func(t *testing.T) { randomizedAtMostOneHolder(t, 5, 5) })
	t.Run("3 voters of 7", func(t *testing.T) { randomizedAtMostOneHolder(t, 7, 3) })
}

func randomizedAtMostOneHolder(t *testing.T, nodes, voters int) {
	const partitions, steps = 16, 4000
	for run := 0; run < 5; run++ {
		seed := uint64(time.Now().UnixNano()) + uint64(run)
		t.Logf("seed %d", seed)
		s := newFleet(t, nodes, voters, partitions, seed)
		offsets := make([]int, nodes)
		held := 0
		for step := 0; step < steps; step++ {
			switch r := s.rng.IntN(100); {
			case r < 50:
				s.round(s.rng.IntN(nodes))
			case r < 75:
				s.now += time.Duration(s.rng.IntN(300)) * ms
			case r < 83:
				a, b := s.rng.IntN(nodes), s.rng.IntN(nodes)
				s.cut[[2]int{min(a, b), max(a, b)}] = true
			case r < 90:
				clear(s.cut)
			default:
				i := s.rng.IntN(nodes)
				offsets[i] = s.rng.IntN(nodes)
				c := NewSet(partitions)
				for p := 0; p < partitions; p++ {
					if (p+offsets[i])%nodes == i {
						c.Add(p)
					}
				}
				s.keepers[i].SetClaims(c)
			}
			s.deliver()
			s.check(step, partitions)
			for p := 0; p < partitions; p++ {
				for _, k := range s.keepers {
					if s.now < k.holder.Until(p) {
						held++
					}
				}
			}
		}
		if held == 0 {
			t.Fatalf("seed %d: no partition was ever held: the test proves nothing", seed)
		}
	}
}

// TestLeaseMovesAfterHolderIsCut: a holder cut off from the others keeps its lease no
// longer than Duration after its last granted round, and the others can be granted the
// partition only after that.
func TestLeaseMovesAfterHolderIsCut(t *testing.T) {
	s := newSim(t, 3, 1, 1)
	s.keepers[0].SetClaims(claim(1, 0))
	s.round(0)
	if !s.keepers[0].Holds(0, s.now) {
		t.Fatal("n0 does not hold partition 0 after a round with every voter")
	}
	lastGrant := s.now
	for _, j := range []int{1, 2} {
		s.cut[[2]int{0, j}] = true
	}
	s.keepers[1].SetClaims(claim(1, 0))
	for s.now < lastGrant+3*time.Second {
		s.now += 100 * ms
		s.round(0)
		s.round(1)
		s.check(0, 1)
		if s.keepers[0].Holds(0, s.now) && s.now >= lastGrant+time.Second-s.keepers[0].cfg.Grace {
			t.Fatalf("n0 still decides at +%dms, cut off since +0", (s.now-lastGrant)/ms)
		}
		if s.keepers[1].Holds(0, s.now) && s.now < lastGrant+s.keepers[0].cfg.hold() {
			t.Fatalf("n1 holds partition 0 at +%dms, before n0's grants (+%dms) ran out", (s.now-lastGrant)/ms, s.keepers[0].cfg.hold()/ms)
		}
	}
	if !s.keepers[1].Holds(0, s.now) {
		t.Fatal("n1 never got partition 0 after n0 was cut off")
	}
}

// TestDropMovesAtOnce: a partition dropped by its holder is granted to the next
// claimant in the next round, without waiting for the grants to run out.
func TestDropMovesAtOnce(t *testing.T) {
	s := newSim(t, 3, 1, 1)
	s.keepers[0].SetClaims(claim(1, 0))
	s.round(0)
	s.keepers[1].SetClaims(claim(1, 0))
	s.round(1)
	if s.keepers[1].Holds(0, s.now) {
		t.Fatal("n1 holds partition 0 while n0 does")
	}
	s.keepers[0].SetClaims(NewSet(1))
	if s.keepers[0].Holds(0, s.now) {
		t.Fatal("n0 still holds partition 0 after it stopped claiming it")
	}
	s.now += 10 * ms
	s.round(0) // carries the drop
	s.round(1)
	if !s.keepers[1].Holds(0, s.now) {
		t.Fatal("n1 not granted partition 0 in the round after n0 dropped it")
	}
}

// TestMembersNotVotersHoldLeasesAndHeartbeatOnlyTheVoters: of seven members with three
// voters, each of the four others is granted what it claims by the voters, and sends
// its heartbeats to the three voters alone.
func TestMembersNotVotersHoldLeasesAndHeartbeatOnlyTheVoters(t *testing.T) {
	const nodes, voters = 7, 3
	s := newFleet(t, nodes, voters, nodes, 1)
	s.prompt = true
	for i, k := range s.keepers {
		k.SetClaims(claim(nodes, i))
	}
	for range 3 { // the first rounds of a node that heard none of its voters yet go to everyone
		for i := range s.keepers {
			s.round(i)
		}
	}
	s.sent = 0
	for i := range s.keepers {
		s.round(i)
	}
	if want := voters*(voters-1) + (nodes-voters)*voters; s.sent != want {
		t.Fatalf("one round each sent %d heartbeats; want %d (each to the voters alone)", s.sent, want)
	}
	for i, k := range s.keepers {
		if !k.Holds(i, s.now) {
			t.Errorf("%s (voter %v) does not hold partition %d it claims", s.names[i], i < voters, i)
		}
	}
}

// TestMembersNotVotersLearnSilenceFromTheVoters: two members that are not voters exchange
// no heartbeat; one learns that the other went silent (it can renew nothing) from the
// voters' replies, once a majority of them say so, and not before.
func TestMembersNotVotersLearnSilenceFromTheVoters(t *testing.T) {
	const nodes, voters = 5, 3
	s := newFleet(t, nodes, voters, 1, 1)
	s.prompt = true
	all := func() {
		for i := range s.keepers {
			s.round(i)
		}
	}
	all()
	all()
	// n4 is cut off from every voter; n3 still reaches them all.
	for v := range voters {
		s.cut[[2]int{v, 4}] = true
	}
	for end := s.now + 2*s.keepers[0].cfg.Duration; s.now < end; {
		s.now += 150 * ms
		all()
	}
	if !s.keepers[3].Silent("n4", 0, s.now) {
		t.Fatal("n3 does not see n4 silent, cut off from every voter for two lease lengths")
	}
	if s.keepers[4].Silent("n3", 0, s.now) {
		t.Fatal("n4, which hears no voter, takes n3 for silent")
	}
	// One voter hears n4 again: two of three still say it is silent.
	delete(s.cut, [2]int{0, 4})
	s.now += 150 * ms
	all()
	all()
	if !s.keepers[3].Silent("n4", 0, s.now) {
		t.Fatal("n3 stopped seeing n4 silent when one voter of three heard it")
	}
	delete(s.cut, [2]int{1, 4})
	s.now += 150 * ms
	all()
	all()
	if s.keepers[3].Silent("n4", 0, s.now) {
		t.Fatal("n3 still sees n4 silent though two voters of three hear it")
	}
}
