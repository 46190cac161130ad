// Package chaos_test runs real leapcount node processes (package proctest) under load
// (package faultload) and breaks them with real signals: the cluster must keep answering
// every counter exactly. Each test bounds every wait and finishes within about a minute.
package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
)

// TestMain runs the suite, except under go test -short (make test): these are the
// fault suites make test-long runs.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("chaos_test: the fault suites against real nodes run in make test-long")
		os.Exit(0)
	}
	os.Exit(proctest.Main(m))
}

// seed picks a random seed and prints it, so a failing run can be replayed.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// checkEvery reads every key's count through every live node (HTTP /v1/batch),
// compares each with base + tallies, and reports how many keys the nodes disagree on.
// It returns the first node's report and counts.
func checkEvery(t *testing.T, c *proctest.Cluster, tallies faultload.Counts, base []int64, window string) (faultload.Report, []int64, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first faultload.Report
	var firstCounts []int64
	disagree := 0
	for _, n := range c.Live() {
		r, counts, err := faultload.Check(ctx, faultload.HTTPCounter{Addr: n.HTTP(), Client: httpClient}, tallies, base, window)
		if err != nil {
			t.Errorf("check through %s: %v", n.Name(), err)
			continue
		}
		if firstCounts == nil {
			first, firstCounts = r, counts
			continue
		}
		if d, ex := faultload.Disagree(tallies.Keys, firstCounts, counts); d > 0 {
			disagree = max(disagree, d)
			t.Errorf("%s disagrees with %s on %d keys, e.g. %v", n.Name(), c.Live()[0].Name(), d, ex)
		}
	}
	return first, firstCounts, disagree
}
