package node_test

import (
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

var sink []byte

// A node with a small store in a process that allocates fast lets its heap grow by a
// quarter second's allocations, up to --gc-headroom, between collections: GOGC alone
// kept a goal of a few MiB.
func TestNodeKeepsTheGCHeadroom(t *testing.T) {
	const most, least = 64 << 20, 32 << 20
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	nodetest.MakeCluster(t, 1, func(c *node.Config) {
		c.GCHeadroom = most
		c.SweepInterval = 10 * time.Millisecond
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // garbage: 1 MiB a millisecond, a quarter second's is 250 MiB
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sink = make([]byte, 1<<20)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	// The headroom GOGC gives: live × GOGC / 100.
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	wait.For(t, 10*time.Second, func() error {
		metrics.Read(s)
		live, percent := s[0].Value.Uint64(), s[1].Value.Uint64()
		if h := live * percent / 100; h < least {
			return fmt.Errorf("GOGC %d with %d MiB live: a headroom of %d MiB; want at least %d MiB", percent, live>>20, h>>20, least>>20)
		}
		return nil
	})
}
