package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leapcount/leapcount/node"
)

// A whole cluster without Redis, every node sent SIGTERM at once, stops at once: no
// node waits for handoffs to peers that leave too (each refuses them), each exits 0
// and logs once that its counts were not persisted. Before, each waited its whole
// shutdown timeout (10 s), exited 1 ("graceful stop failed") and warned of
// write-behind in doubt although there was no Redis to write behind to.
func TestWholeClusterWithoutRedisStopsAtOnce(t *testing.T) {
	nodes, tokenFile := threeNodes(t)
	for i := range 30 { // counters on every node, so that each has something to hand on
		req, _ := http.NewRequest("POST", "http://"+nodes[0].http+"/v1/incr", strings.NewReader(fmt.Sprintf(`{"key":"k%d","window":"1m"}`, i)))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("incr k%d: %s (token file %s)", i, resp.Status, tokenFile)
		}
	}
	start := time.Now()
	for _, p := range nodes {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	// Well within the shutdown timeout: a stop that waited for it would exit 0 only late.
	bound := node.DefaultShutdownTimeout / 2
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, p := range nodes {
		wg.Go(func() { errs[i] = waitExit(p.cmd, bound) })
	}
	wg.Wait()
	t.Logf("the cluster stopped in %v", time.Since(start).Round(time.Millisecond))
	for i, p := range nodes {
		if errs[i] != nil {
			t.Errorf("node %d after SIGTERM: %v (bound %v)", i, errs[i], bound)
		}
		checkStopLog(t, i, p.log.all(t))
	}
}

// checkStopLog checks the log of a node stopped with the whole cluster, without Redis.
func checkStopLog(t *testing.T, i int, lines []string) {
	t.Helper()
	said := 0
	for _, l := range lines {
		if strings.Contains(l, node.MsgNotPersisted) {
			said++
		}
		for _, bad := range []string{"graceful stop failed", "write-behind in doubt", "level=ERROR"} {
			if strings.Contains(l, bad) {
				t.Errorf("node %d logged %q: %s", i, bad, l)
			}
		}
	}
	if said != 1 {
		t.Errorf("node %d logged %q %d times; want once", i, node.MsgNotPersisted, said)
	}
}
