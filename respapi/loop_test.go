package respapi

import (
	"fmt"
	"strings"
	"testing"
)

// A pipeline whose batches alternate between ops decided at once and ops decided later
// is answered whole, in order, and what came after a
// waiting batch is served after it.
func TestParkedBatchesKeepThePipelineInOrder(t *testing.T) {
	for _, way := range waysToWait {
		t.Run(way.name, func(t *testing.T) { testParkedBatchesKeepThePipelineInOrder(t, way.edit) })
	}
}

func testParkedBatchesKeepThePipelineInOrder(t *testing.T, edit func(*Config)) {
	ts := startServer(t, edit)
	cl := ts.dial(t)
	var in strings.Builder
	var want []string
	counts := map[string]int{} // each key counts once per op on it, in order
	for i := range 20 {
		key := fmt.Sprintf("k%d", i%3)
		if i%4 == 1 {
			key = "wait:" + key
		}
		in.WriteString(encode("SW.INCR", key, "1m"))
		counts[key]++
		want = append(want, fmt.Sprintf(":%d", counts[key]))
		if i%5 == 2 {
			in.WriteString(encode("PING"))
			want = append(want, "+PONG")
		}
	}
	cl.write(in.String())
	for i, w := range want {
		if got := cl.reply(); got != w {
			t.Fatalf("reply %d: got %q; want %q", i, got, w)
		}
	}
	if !serveStreams && ts.decider.parked.Load() == 0 {
		t.Fatalf("no batch was decided later: the test does not test parking")
	}
	cl.wantServes()
}

// While one connection's batch waits to be decided, the loop goes on serving the others, and
// the waiting connection's later commands wait for it.
func TestAWaitingBatchHoldsUpOnlyItsConnection(t *testing.T) {
	for _, way := range waysToWait {
		t.Run(way.name, func(t *testing.T) { testAWaitingBatchHoldsUpOnlyItsConnection(t, way.edit) })
	}
}

func testAWaitingBatchHoldsUpOnlyItsConnection(t *testing.T, edit func(*Config)) {
	gate := make(chan struct{})
	ts := startServer(t, edit)
	ts.decider.gate.Store(&gate)
	waiting := ts.dial(t)
	waiting.write(encode("SW.INCR", "wait:a", "1m") + encode("PING"))
	for i := range 50 { // more connections than event loops: some share the waiting one's
		cl := ts.dial(t)
		wantReply(t, cl.do("SW.INCR", "b", "1m"), fmt.Sprintf(":%d", i+1))
	}
	close(gate)
	wantReply(t, waiting.reply(), ":1")
	wantReply(t, waiting.reply(), "+PONG")
}

// A transaction of ops runs where it may wait, and answers in one array.
func TestExecOfWaitingOpsAnswersInOneArray(t *testing.T) {
	for _, way := range waysToWait {
		t.Run(way.name, func(t *testing.T) { testExecOfWaitingOpsAnswersInOneArray(t, way.edit) })
	}
}

func testExecOfWaitingOpsAnswersInOneArray(t *testing.T, edit func(*Config)) {
	ts := startServer(t, edit)
	cl := ts.dial(t)
	cl.write(encode("MULTI") + encode("SW.INCR", "wait:x", "1m") + encode("PING") + encode("SW.INCR", "y", "1m") +
		encode("EXEC") + encode("SW.COUNT", "wait:x", "1m"))
	for _, w := range []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", "*[:1 +PONG :1]", ":1"} {
		wantReply(t, cl.reply(), w)
	}
}
