package lease

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// fleet is n keepers at production's lease timings on a network that delivers every
// heartbeat at once, driven one round each per Heartbeat in one goroutine: what a
// cluster's leases cost as it grows, without the processes.
type fleet struct {
	now     time.Duration
	cfg     Config
	names   []string
	keepers []*Keeper
	sent    int // heartbeats sent
}

// startFleet starts n members at once, each claiming the partitions p with p%n == its
// index; the first founds the cluster once each has told it, in a heartbeat round, that
// it has no voters (as node.seesCluster does).
func startFleet(n, partitions int) *fleet {
	f := &fleet{cfg: Config{}.WithDefaults()}
	var peers []Peer
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("m%03d", i))
		peers = append(peers, Peer{Name: f.names[i], Addr: f.names[i]})
	}
	for i, name := range f.names {
		k := NewKeeper(KeeperConfig{Self: name, Incarnation: 1, Partitions: partitions, Clock: clockAt(&f.now)})
		k.SetView(View{Alive: f.names}, peers)
		c := NewSet(partitions)
		for p := i; p < partitions; p += n {
			c.Add(p)
		}
		k.SetClaims(c)
		f.keepers = append(f.keepers, k)
	}
	f.round()
	if !f.keepers[0].NoneHaveVoters(f.names) {
		panic("lease: a member of a new fleet said it has voters")
	}
	f.keepers[0].Found(f.names...)
	return f
}

// round runs every member's heartbeat round, then moves the clock a heartbeat on.
func (f *fleet) round() {
	for _, k := range f.keepers {
		req, targets, _ := k.begin(0)
		f.sent += len(targets)
		for _, p := range targets {
			to := f.keepers[slices.Index(f.names, p.Name)]
			k.Absorb(p.Name, req, to.Handle(req))
		}
	}
	f.now += f.cfg.Heartbeat
}

// settled reports whether every member has the same voters, as many as the fleet keeps,
// and holds every partition it claims.
func (f *fleet) settled() error {
	want := f.keepers[0].Voters()
	if len(want) != f.cfg.TargetVoters(len(f.keepers)) {
		return fmt.Errorf("%d voters; want %d", len(want), f.cfg.TargetVoters(len(f.keepers)))
	}
	for i, k := range f.keepers {
		if v := k.Voters(); !slices.Equal(v, want) {
			return fmt.Errorf("%s has voters %v; %s has %v", f.names[i], v, f.names[0], want)
		}
		bad := -1
		k.claims.Each(func(p int) {
			if bad < 0 && !k.Holds(p, f.now) {
				bad = p
			}
		})
		if bad >= 0 {
			return fmt.Errorf("%s does not hold partition %d it claims", f.names[i], bad)
		}
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFleetCostsWhatFiveVotersCost starts 3, 24, 64 and 200 members at once and measures,
// in simulated time, how long until the voters are chosen and every member holds what it
// claims, then heartbeats sent per member per second and the CPU the rounds take per
// member per second of simulated time (all in this one goroutine). Heartbeats per member
// must not grow with the fleet past five voters, nor the time to settle.
func TestFleetCostsWhatFiveVotersCost(t *testing.T) {
	sizes := []int{3, 24, 64, 200}
	if testing.Short() {
		sizes = []int{3, 24, 64}
	}
	rate := map[int]float64{}
	var first time.Duration
	for _, n := range sizes {
		f := startFleet(n, 4096)
		var err error
		for err = f.settled(); err != nil && f.now < time.Minute; err = f.settled() {
			f.round()
		}
		if err != nil {
			t.Fatalf("%d members: not settled after a minute: %v", n, err)
		}
		settle := f.now // (from the first round: the first members' grantors refuse grants for a lease's length as they start)
		f.sent = 0
		start, cpu := f.now, cpuTime()
		for f.now-start < 10*time.Second {
			f.round()
		}
		span := (f.now - start).Seconds()
		rate[n] = float64(f.sent) / float64(n) / span
		perNode := time.Duration(float64(cpuTime()-cpu) / float64(n) / span)
		t.Logf("%3d members: settled %4.1f s after starting, %5.1f heartbeats sent a member a second, %v of CPU a member a second",
			n, settle.Seconds(), rate[n], perNode.Round(time.Microsecond))
		if err := f.settled(); err != nil {
			t.Fatalf("%d members: unsettled while idle: %v", n, err)
		}
		if n == sizes[0] {
			first = settle
		} else if settle > first+3*f.cfg.Heartbeat {
			t.Errorf("%d members settled after %v; want within three heartbeats of %d members' %v", n, settle, sizes[0], first)
		}
	}
	if big := rate[sizes[len(sizes)-1]]; big > 1.1*rate[24] {
		t.Errorf("heartbeats a member a second: %.1f at %d members against %.1f at 24; want no more", big, sizes[len(sizes)-1], rate[24])
	}
}
