package respapi

import (
	"fmt"
	"strings"
	"testing"
)

func TestPipelineIsOneDoCall(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	wantReply(t, c.do("PING"), "+PONG") // the connection is up before counting
	const n = 60                        // about 2.5 KB: one read on loopback
	calls := ts.decider.calls.Load()
	c.write(strings.Repeat(encode("SW.INCR", "p", "1m"), n))
	for i := 1; i <= n; i++ {
		wantReply(t, c.reply(), fmt.Sprintf(":%d", i))
	}
	// TCP may split the pipeline across reads, each read being one batch; a few
	// calls are fine, one call per command is not.
	if got := ts.decider.calls.Load() - calls; got > 3 {
		t.Fatalf("got %d Do calls for a pipeline of %d commands; want at most 3", got, n)
	}
	if got := ts.decider.ops.Load(); got != n {
		t.Fatalf("got %d ops decided; want %d", got, n)
	}
	// Each batch is timed once: as many observations as Do calls, not one a command.
	if got, calls := ts.histogramCount(t, "leapcount_resp_batch_duration_seconds"), ts.decider.calls.Load()-calls; got != uint64(calls) {
		t.Fatalf("%d batch latencies observed for %d batches", got, calls)
	}
}

func TestMixedPipelineAnswersInOrder(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	c.write(encode("SW.INCR", "m", "1m") +
		encode("PING") +
		encode("SW.INCR", "m", "1m", "BY", "0") +
		encode("NOSUCH") +
		encode("SW.INCR", "m", "1m") +
		encode("SW.INCR") +
		encode("SW.COUNT", "m", "1m") +
		encode("SW.ALLOW", "m", "1m", "5") +
		encode("SW.RESET", "m", "1m") +
		encode("PING", "done"))
	for _, want := range []string{
		":1",
		"+PONG",
		"-ERR invalid n: n must be from 1 to 2147483647, got 0",
		"-ERR unknown command 'NOSUCH', with args beginning with: ",
		":2",
		"-ERR wrong number of arguments for 'sw.incr' command",
		":2",
		"*[:1 :3 :2 :0]",
		":1",
		"$done",
	} {
		wantReply(t, c.reply(), want)
	}
}

func TestMetricsCountCommands(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	c.do("SW.INCR", "k", "1m")
	c.do("SW.INCR", "k", "1m")
	c.do("SW.INCR", "k", "bad")
	c.do("NOSUCH")
	c.do("PING")
	for _, tc := range []struct {
		command, outcome string
		want             float64
	}{
		{"sw.incr", "ok", 2},
		{"sw.incr", "bad_request", 1},
		{"sw.incr", "failed", 0},
		{"unknown", "bad_request", 1},
		{"ping", "ok", 1},
		{"sw.allow", "ok", 0},
	} {
		if got := ts.metricValue(t, tc.command, tc.outcome); got != tc.want {
			t.Fatalf("%s %s: got %v; want %v", tc.command, tc.outcome, got, tc.want)
		}
	}
}
