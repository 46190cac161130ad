package lease

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leapcount/leapcount/internal/clock"
	"github.com/leapcount/leapcount/internal/lockrank"
	"github.com/leapcount/leapcount/internal/ntp"
)

// Exchanger sends a heartbeat to the node at addr and returns its reply
// (peerrpc.Heartbeats in production).
type Exchanger interface {
	Exchange(ctx context.Context, addr string, req *Request) (*Reply, error)
}

// Peer is a member a heartbeat can reach.
type Peer struct {
	Name string
	Addr string // its rpc address
}

// KeeperConfig is what a Keeper needs.
type KeeperConfig struct {
	Config
	Self        string
	Incarnation uint64
	Partitions  int
	Exchanger   Exchanger
	// Found: this node founds a cluster (it has nobody to join): it is the only voter,
	// and its grantor needs no quarantine.
	Found bool
	// OnLapse hears the partitions whose lease ran out while claimed (not dropped).
	// Called from the Keeper's goroutine, never with its lock held.
	OnLapse func(Set)
	// OnChange hears that a lease may have changed (a grant counted, claims changed, a
	// round begun), so that what waits for one looks again. Never called with the
	// Keeper's lock held; it must not block.
	OnChange func()
	// Clock is the node's monotonic clock, the one its owner runs on (nil: clock.Real):
	// every lease instant and span here is read on it. Only Since is used (Run times
	// its rounds with time's own timers).
	Clock clock.Clock
	// Wall is the node's counters' clock (node.Config.Now): heartbeats carry its
	// readings, so that each node measures its peers' against its own (ClockOffsets).
	// It decides nothing here, and is read under the Keeper's lock. nil: none
	// (heartbeats carry 0 and no offset is measured).
	Wall clock.WallMs
}

// Keeper runs the heartbeats of one node: it renews the leases of the partitions the
// node claims, answers its peers' heartbeats with its grants, and keeps its voters.
type Keeper struct {
	cfg KeeperConfig
	now func() time.Duration // cfg.Clock.Since

	mu         lockrank.Mutex[lockrank.LeaseKeeper]
	grantor    *Grantor
	holder     *Holder
	voters     *Voters
	view       View
	peers      []Peer
	claims     Set
	dropping   Set
	dropRounds int // rounds the current drops have been sent in
	held       Set // claimed partitions seen held at the last check
	next       uint64
	retryAt    time.Duration // see RetryIn
	lastRound  time.Duration // when the last round began
	awake      time.Duration // when this node last began a round after missing some (frozen): see Silent
	lastHeard  map[string]time.Duration
	runs       map[string]uint64        // each member's incarnation, from its last heartbeat
	leftRuns   map[string]uint64        // the incarnation each member that left gracefully ran
	noVoters   map[string]time.Duration // when each member last said it had no voters, while this node had none
	offsets    map[string]ntp.Estimate  // each member's counters' clock against this node's (ClockOffsets)
	silentNow  []string                 // the members this node, a voter, finds silent as its last round began (Reply.Silent)
	silentBy   map[string]heardSilent   // what each voter's last reply said was silent (Silent)
	// foundSilent are the members Silent found silent, each since when, until one is
	// heard again: a freeze of this node does not excuse them (stillSilent).
	foundSilent map[string]time.Duration

	stats   stats                         // Stats
	changed atomic.Pointer[chan struct{}] // closed and replaced whenever a lease may have changed
	kick    chan struct{}
}

// NewKeeper returns a Keeper; Run drives it.
func NewKeeper(cfg KeeperConfig) *Keeper {
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	t := cfg.Clock.Since()
	k := &Keeper{cfg: cfg, now: cfg.Clock.Since, grantor: NewGrantor(cfg.Config, cfg.Partitions, t, !cfg.Found),
		holder: NewHolder(cfg.Config, cfg.Partitions), voters: NewVoters(cfg.Config, cfg.Self),
		claims: NewSet(cfg.Partitions), dropping: NewSet(cfg.Partitions), held: NewSet(cfg.Partitions),
		next: 1, lastHeard: map[string]time.Duration{}, runs: map[string]uint64{}, leftRuns: map[string]uint64{}, noVoters: map[string]time.Duration{},
		offsets: map[string]ntp.Estimate{}, silentBy: map[string]heardSilent{}, foundSilent: map[string]time.Duration{}, kick: make(chan struct{}, 1)}
	if cfg.Found {
		k.voters.Found()
	} else {
		k.voters.Quarantine(t + 2*cfg.Heartbeat)
	}
	ch := make(chan struct{})
	k.changed.Store(&ch)
	return k
}

// DecideUntil is when this node must stop deciding p (KeeperConfig.Clock; 0: it does
// not hold p). Safe to call from any goroutine; it does not lock.
func (k *Keeper) DecideUntil(p int) time.Duration { return k.holder.DecideUntil(p) }

// Until is when this node's lease of p ends (KeeperConfig.Clock; 0: not held): no
// other node is granted p before. Safe to call from any goroutine.
func (k *Keeper) Until(p int) time.Duration { return k.holder.Until(p) }

// Holds reports whether this node may decide p at now (KeeperConfig.Clock).
func (k *Keeper) Holds(p int, now time.Duration) bool { return now < k.holder.DecideUntil(p) }

// Wait waits until this node may decide p, or ctx ends.
func (k *Keeper) Wait(ctx context.Context, p int) error {
	for {
		ch := k.changed.Load() // before the check, so a change in between is not missed
		if k.Holds(p, k.now()) {
			return nil
		}
		select {
		case <-*ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (k *Keeper) signal() {
	ch := make(chan struct{})
	close(*k.changed.Swap(&ch))
	if k.cfg.OnChange != nil {
		k.cfg.OnChange()
	}
}

// SetView tells the Keeper what membership says now, and the peers it can reach.
func (k *Keeper) SetView(view View, peers []Peer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.view, k.peers = view, peers
	for _, name := range view.Left {
		// The run gossip says left, when it says one: the member may have restarted
		// since, and its new run's heartbeats reach this node before gossip tells it
		// that run is alive. The run last heard would then be taken for the one that
		// left, and a later run never seen as one to hand partitions to (runHeard).
		if run := view.LeftRuns[name]; run != 0 {
			k.leftRuns[name] = run
		} else if run, ok := k.runs[name]; ok {
			k.leftRuns[name] = run
		}
	}
	for name := range k.leftRuns {
		if !slices.Contains(view.Left, name) && !k.known(name) {
			delete(k.leftRuns, name)
		}
	}
	for name := range k.lastHeard {
		if !k.known(name) {
			delete(k.lastHeard, name)
		}
	}
	for name := range k.runs {
		if !k.known(name) {
			delete(k.runs, name)
		}
	}
	for name := range k.noVoters {
		if !k.known(name) {
			delete(k.noVoters, name)
		}
	}
	for name := range k.offsets {
		if !k.known(name) {
			delete(k.offsets, name)
		}
	}
	for name := range k.silentBy {
		if !k.voters.Has(name) {
			delete(k.silentBy, name)
		}
	}
	for name := range k.foundSilent {
		if !k.known(name) {
			delete(k.foundSilent, name)
		}
	}
}

// known reports whether name is a voter or a member membership sees alive: whose
// heartbeats are remembered (lastHeard). Anyone who reaches the rpc port can send one
// under any name; remembering every name would grow without bound.
func (k *Keeper) known(name string) bool {
	return k.voters.Has(name) || slices.Contains(k.view.Alive, name)
}

// heard records a heartbeat exchanged with name at now, in which name said its voters.
func (k *Keeper) heard(name string, voters []string, now time.Duration) {
	if !k.known(name) {
		return
	}
	k.lastHeard[name] = now
	delete(k.foundSilent, name)
	switch {
	case !k.voters.Empty():
		clear(k.noVoters)
	case len(voters) == 0:
		k.noVoters[name] = now
	}
}

// NoneHaveVoters reports whether this node has no voters, and every member named but
// itself told it so of its own within the last lease duration: none of them belongs to
// a cluster that has run. A node that founds a cluster must know this of every member
// it may join instead (node.seesCluster).
func (k *Keeper) NoneHaveVoters(names []string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if !k.voters.Empty() {
		return false
	}
	for _, name := range names {
		if at, ok := k.noVoters[name]; name != k.cfg.Self && (!ok || now-at > k.cfg.Duration) {
			return false
		}
	}
	return true
}

// SetClaims sets the partitions this node wants to hold. Partitions no longer claimed
// stop being held at once and are dropped at the grantors in the next rounds
// (Request.Drops); a round runs at once when claims changed, so that a drop reaches the
// grantors, and a new claim is granted, without waiting for the next heartbeat.
func (k *Keeper) SetClaims(claims Set) {
	k.mu.Lock()
	changed := false
	for p := 0; p < k.cfg.Partitions; p++ {
		switch was, is := k.claims.Has(p), claims.Has(p); {
		case was && !is:
			k.holder.Drop(p, k.next)
			k.held.Remove(p)
			k.dropping.Add(p)
			k.dropRounds = 0
			changed = true
		case !was && is:
			k.dropping.Remove(p)
			changed = true
		}
	}
	k.claims = claims.Clone()
	k.mu.Unlock()
	k.signal()
	if changed {
		k.Kick()
	}
}

// Kick runs a round soon, without waiting for the next heartbeat.
func (k *Keeper) Kick() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Voters returns the current voters, sorted.
func (k *Keeper) Voters() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.voters.List()
}

// VotersVersion is the version of the current voters (Voters.Version).
func (k *Keeper) VotersVersion() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.voters.Version()
}

// HasVoters reports whether this node knows its voters (it founded a cluster or learned
// them from a peer).
func (k *Keeper) HasVoters() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.voters.Empty()
}

// Found founds a cluster when this node has no voters: it has waited for a cluster to
// join in vain (NoneHaveVoters of every member it sees). Its first voters are itself
// and, up to their number, those of with that told it within a lease's length that they
// have no voters either (the members it sees alive).
func (k *Keeper) Found(with ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.voters.Empty() {
		return
	}
	now := k.now()
	fresh := slices.DeleteFunc(slices.Clone(with), func(name string) bool {
		at, ok := k.noVoters[name]
		return !ok || now-at > k.cfg.Duration
	})
	k.voters.FoundWith(fresh, k.view.Zones)
}

// Quorate reports whether this node may hope to be granted anything: it has exchanged a
// heartbeat with a majority of its voters (itself included) within one lease duration
// before now, or it has not had that long to: it ran again only just now after missing
// rounds (frozen or starved), and heard nobody meanwhile through no fault of theirs (as
// Silent excuses them). A node cut off from the majority says so at once rather than keep
// clients waiting; one that was only starved must not say so of a cluster that is fine.
func (k *Keeper) Quorate(now time.Duration) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.quorate(now) || !k.voters.Empty() && now-k.awakeAt(now) <= k.cfg.Duration
}

// quorate reports whether this node has exchanged a heartbeat with a majority of its
// voters (itself included) within one lease duration before now. The caller holds mu.
func (k *Keeper) quorate(now time.Duration) bool {
	n := 0
	for _, v := range k.voters.List() {
		if v == k.cfg.Self || now-k.lastHeard[v] <= k.cfg.Duration {
			n++
		}
	}
	return !k.voters.Empty() && n >= k.voters.Quorum()
}

// Incarnation is the run of the member named name, as its last heartbeat here said (0:
// none heard). A node that restarted has another: what its earlier run held is gone.
// Every member sends its heartbeats to the voters, so a voter hears every run at once; a
// member that is not a voter hears none (it sends heartbeats, and is sent none), and
// knows the others' runs from gossip (View.Runs) as well, the later of the two.
func (k *Keeper) Incarnation(name string) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.voters.Has(k.cfg.Self) {
		return k.runs[name]
	}
	return max(k.runs[name], k.view.Runs[name])
}

// GrantedTo names who this node's grantor holds p granted to now ("" if nobody).
func (k *Keeper) GrantedTo(p int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.grantor.Holder(p, k.now())
}

// GrantCounts counts, by holder, the partitions this node's grantor has granted now.
func (k *Keeper) GrantCounts() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	out := map[string]int{}
	for p := range k.grantor.parts {
		if h := k.grantor.Holder(p, now); h != "" {
			out[h]++
		}
	}
	return out
}

// LeftRun is the incarnation of the member named name that left the cluster
// gracefully, handing on what it held (0: none known).
func (k *Keeper) LeftRun(name string) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.leftRuns[name]
}

// LastHeard is when (KeeperConfig.Clock) a heartbeat with name last succeeded either
// way (0: never).
func (k *Keeper) LastHeard(name string) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastHeard[name]
}

// Handle answers a peer's heartbeat (the rpc server calls it).
func (k *Keeper) Handle(req *Request) *Reply {
	received := k.wall()
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	k.voters.Report(req.From, req.Alive, req.Voters, req.Version, now)
	k.heard(req.From, req.Voters, now)
	if k.known(req.From) {
		k.runs[req.From] = req.Incarnation
	}
	k.stats.heard.Add(1)
	rep := k.grantor.Grant(req, k.known(req.From), now)
	k.stats.granted.Add(uint64(rep.Granted.Len()))
	rep.Voters, rep.Version, rep.Silent = k.voters.List(), k.voters.Version(), k.silentNow
	rep.Change = k.voters.Accept(req.From, req.Change, req.Voters, req.Version, now)
	if k.voters.Has(req.From) {
		rep.Alive = k.view.Alive // (only a voter's view of who is alive counts: Voters.agree)
	}
	if req.SentAt != 0 && received != 0 {
		rep.ReceivedAt, rep.RepliedAt = received, k.wall()
	}
	return &rep
}

// Run sends a round of heartbeats every Heartbeat, when kicked, and when a claim
// blocked by another holder's grant can be granted (RetryIn), until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.cfg.Heartbeat)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		k.Round(ctx)
		if d, ok := k.RetryIn(k.now()); ok {
			retry.Reset(d)
		} else {
			retry.Reset(time.Hour) // the ticker comes first
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.kick:
		case <-retry.C:
		}
	}
}
