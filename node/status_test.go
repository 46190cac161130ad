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
	for _, c := range []struct {
		edit func(*ClusterView)
		want string
	}{
		{func(v *ClusterView) { v.Ready = false }, "a is not ready"},
		{func(v *ClusterView) { v.Members[1].State = "dead" }, "member b is dead"},
		{func(v *ClusterView) { v.Members[1].Voter = false }, "member b is joining"},
		{func(v *ClusterView) { v.Members[1].Partitions = 0 }, "member b is joining"},
		{func(v *ClusterView) { v.Redis = "down" }, "Redis is down"},
		{func(v *ClusterView) { v.LagMs = 31_000 }, "the oldest batch has waited 31 s"},
		{func(v *ClusterView) { v.Held = 7 }, "a decides 7 of the 10 partitions it owns"},
		{func(v *ClusterView) { v.HandingOn = 2 }, "2 partitions are moving"},
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
