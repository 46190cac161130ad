package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Each member learns every other member's version from the push-pull state.
func TestMembersLearnEachOthersVersions(t *testing.T) {
	cfg := clustertest.Config(t, "a")
	cfg.Version = "v1.0.0"
	a := clustertest.Start(t, cfg)
	var cs []*cluster.Cluster
	for i, name := range []string{"b", "c"} {
		cfg := clustertest.Config(t, name, a.LocalAddr())
		cfg.Version = fmt.Sprintf("v1.%d.0", i+1)
		cs = append(cs, clustertest.Start(t, cfg))
	}
	want := map[string]string{"a": "v1.0.0", "b": "v1.1.0", "c": "v1.2.0"}
	for _, c := range append(cs, a) {
		wait.For(t, 30*time.Second, func() error {
			for _, m := range c.Members() {
				if m.Version != want[m.Name] {
					return fmt.Errorf("a member sees %s at version %q, want %q", m.Name, m.Version, want[m.Name])
				}
			}
			if n := len(c.Members()); n != 3 {
				return fmt.Errorf("%d members", n)
			}
			return nil
		})
	}
}
