package cluster_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// TestOnlyKeyAndLabelHoldersJoin: members with no key, another key, or another cluster
// name try to join a keyed cluster and stay out, while a member with a key added for
// rotation (the cluster's first, a new one second) gets in.
func TestOnlyKeyAndLabelHoldersJoin(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	keyed := func(name string, keys [][]byte, label string, join ...string) cluster.Config {
		cfg := clustertest.Config(t, name, join...)
		cfg.Keys, cfg.Label = keys, label
		return cfg
	}
	a := clustertest.Start(t, keyed("a", [][]byte{k1}, "prod"))
	outsiders := []*cluster.Cluster{
		clustertest.Start(t, keyed("no-key", nil, "prod", a.LocalAddr())),
		clustertest.Start(t, keyed("other-key", [][]byte{k2}, "prod", a.LocalAddr())),
		clustertest.Start(t, keyed("other-name", [][]byte{k1}, "staging", a.LocalAddr())),
		clustertest.Start(t, keyed("no-name", [][]byte{k1}, "", a.LocalAddr())),
	}
	member := clustertest.Start(t, keyed("member", [][]byte{k1, k2}, "prod", a.LocalAddr()))
	clustertest.WaitConverged(t, deadline, a, member)
	// Each outsider has tried, and failed, twice by the time this returns.
	for _, o := range outsiders {
		wait.For(t, deadline, func() error {
			if n := cluster.JoinFailures(o); n < 2 {
				return fmt.Errorf("%s: %d failed joins; want 2", o.Name(), n)
			}
			return nil
		})
	}
	for _, c := range append(outsiders, a, member) {
		var names []string
		for _, m := range c.Members() {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		want := []string{c.Name()}
		if c == a || c == member {
			want = []string{"a", "member"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s sees %v; want %v", c.Name(), names, want)
		}
	}
}
