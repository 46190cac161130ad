package node

import (
	"strings"
	"testing"
)

// Problems names each thing that is wrong or settling, and nothing on a whole cluster.
func TestProblems(t *testing.T) {
	whole := ClusterView{Self: "a", Ready: true, Redis: "up", Owned: 10, Held: 10, Members: []MemberView{
		{Name: "a", State: "alive", Partitions: 10, Voter: true}, {Name: "b", State: "alive", Partitions: 9, Voter: true},
		{Name: "c", State: "left"}}}
	if p := whole.Problems(); len(p) != 0 {
		t.Fatalf("a whole cluster: %q", p)
	}
	notVoter := whole
	notVoter.Members = append([]MemberView(nil), whole.Members...)
	notVoter.Members[1].Voter = false
	if p := notVoter.Problems(); len(p) != 0 {
		t.Fatalf("a member owning partitions that is not a voter (the voters are bounded): %q", p)
	}
	three := ClusterView{Self: "a", Ready: true, Redis: "up", Owned: 10, Held: 10, Members: []MemberView{
		{Name: "a", State: "alive", Partitions: 10, Voter: true}, {Name: "b", State: "alive", Partitions: 9, Voter: true},
		{Name: "c", State: "dead", Voter: true}, {Name: "d", State: "dead"}}}
	if p := three.Problems(); len(p) != 0 {
		t.Fatalf("dead members whose partitions moved, the voters alive a majority: %q", p)
	}
	if n := three.Notes(); len(n) != 2 || !strings.Contains(n[0], "member c is dead") || !strings.Contains(n[0], "a voter until") {
		t.Fatalf("notes %q; want c (a voter) and d dead", n)
	}
	three.Members[1].State = "dead"
	three.Members[1].Partitions = 0
	if p := three.Problems(); len(p) != 2 || !strings.Contains(p[0], "no majority") {
		t.Fatalf("two voters of three dead: problems %q; want both named, no majority", p)
	}
	near := whole
	near.Clock = ClockView{Redis: &OffsetView{OffsetMs: -2500}, Peers: map[string]OffsetView{"b": {OffsetMs: 2500}}}
	if p := near.Problems(); len(p) != 0 {
		t.Fatalf("clocks within 2.5 s: %q", p)
	}
	for _, c := range []struct {
		edit func(*ClusterView)
		want string
	}{
		{func(v *ClusterView) { v.Ready = false }, "a is not ready"},
		{func(v *ClusterView) { v.Ready, v.AwaitingSeeds, v.JoinFailures = false, true, 4 }, "a has not joined the cluster: 4 joins failed"},
		{func(v *ClusterView) { v.Ready, v.AwaitingSeeds = false, true }, "a has not joined the cluster yet: its first join is under way"},
		{func(v *ClusterView) { v.Members[1].State = "dead" }, "member b is dead"},
		{func(v *ClusterView) { v.Members[1].Partitions = 0 }, "member b is joining"},
		{func(v *ClusterView) { v.Redis = "down" }, "Redis is down"},
		{func(v *ClusterView) { v.LagMs = 31_000 }, "the oldest batch has waited 31 s"},
		{func(v *ClusterView) { v.Held = 7 }, "a decides 7 of the 10 partitions it owns"},
		{func(v *ClusterView) { v.HandingOn = 2 }, "2 partitions are moving"},
		{func(v *ClusterView) { v.Clock.Redis = &OffsetView{OffsetMs: 8000} }, "a's counters' clock is 8s behind Redis's"},
		{func(v *ClusterView) { v.Clock.Redis = &OffsetView{OffsetMs: -2600} }, "a's counters' clock is 2.6s ahead of Redis's"},
		{func(v *ClusterView) { v.Clock.RedisUnknown = true }, "a cannot measure its counters' clock against Redis's"},
		{func(v *ClusterView) { v.Clock.Peers = map[string]OffsetView{"b": {OffsetMs: 8040}} }, "member b's counters' clock is 8s ahead of a's"},
		{func(v *ClusterView) { v.Clock.Peers = map[string]OffsetView{"b": {OffsetMs: -3000}} }, "member b's counters' clock is 3s behind a's"},
	} {
		v := whole
		v.Members = append([]MemberView(nil), whole.Members...)
		c.edit(&v)
		p := v.Problems()
		if len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("got %q; want one problem naming %q", p, c.want)
		}
	}
}
