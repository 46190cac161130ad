package chaos_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Allows of one hot counter through three node processes started with --slices, 16
// clients spread over them; a node that holds slices of it, not its owner, is killed
// (SIGKILL) mid-load (docs/guarantees.md, the row "limit slices: a node holding slices
// crashes or stops"). Nothing is admitted past the limit; nothing acknowledged is lost
// (what the killed node admitted was counted when its slices were lent); the count
// never passes the limit, its unspent slices counted at most.
func TestSlicesBorrowerKilled(t *testing.T) {
	args := append([]string{"--slices", "--slice-after", "5"}, fastDetection...)
	c := proctest.StartCluster(t, 3, proctest.Options{Args: args, RESPCluster: true})
	const key, window, limit = "slices:hot", "1m", 40000

	var admitted, denied, unknown atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		rc := respClient(c.Node(i % 3).RESP())
		defer rc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				v, err := rc.Do(ctx, "SW.ALLOW", key, window, limit).Slice()
				switch {
				case err != nil && ctx.Err() != nil:
					return
				case err != nil:
					unknown.Add(1) // (a connection to the killed node: it may have been admitted)
					time.Sleep(10 * time.Millisecond)
				case v[0].(int64) == 1:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second) // load before the kill: not a wait for a condition
	// The victim: a node that borrowed slices of the counter, so not its owner (which
	// never borrows its own).
	var victim *proctest.Node
	var held int64
	for _, n := range c.Nodes() {
		if b := metric(t, n.HTTP(), "leapcount_slices_borrowed_total"); b > held {
			victim, held = n, b
		}
	}
	if victim == nil {
		t.Fatal("no node borrowed a slice of the hot counter: the test proves nothing")
	}
	t.Logf("killing %s, which borrowed %d slices", victim.Name(), held)
	victim.Kill()
	time.Sleep(4 * time.Second) // load after it
	cancel()
	wg.Wait()
	t.Logf("admitted %d, denied %d, unknown %d", admitted.Load(), denied.Load(), unknown.Load())
	if got := admitted.Load(); got > limit {
		t.Fatalf("%d admitted; the limit is %d", got, limit)
	}
	if denied.Load() == 0 {
		t.Fatalf("nothing was denied: the load never reached the limit, the test proves nothing")
	}
	rc := respClient(c.Live()[0].RESP())
	defer rc.Close()
	var final int64
	wait.For(t, 15*time.Second, func() error { // the survivors' slices end and come back
		var err error
		if final, err = rc.Do(context.Background(), "SW.COUNT", key, window).Int64(); err != nil {
			return err
		}
		if final < admitted.Load() {
			return fmt.Errorf("count %d; %d acknowledged admissions (none may be lost)", final, admitted.Load())
		}
		return nil
	})
	if final > limit {
		t.Fatalf("count %d; past the limit %d", final, limit)
	}
	t.Logf("final count %d: %d acknowledged, %d unknown, the rest the killed node's unspent slices", final, admitted.Load(), unknown.Load())
}
