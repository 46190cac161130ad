package respapi

import "testing"

// Connections the event loops cannot poll (in-process ones) are served on goroutines
// of their own, with the same answers and the same limits.
func TestStreamConnections(t *testing.T) {
	serveStreams = true
	defer func() { serveStreams = false }()
	for name, test := range map[string]func(*testing.T){
		"pipeline":        TestMixedPipelineAnswersInOrder,
		"parked":          TestParkedBatchesKeepThePipelineInOrder,
		"exec":            TestExecOfWaitingOpsAnswersInOneArray,
		"quit":            TestQuitDropsTheRestOfThePipeline,
		"hostile":         TestHostileFramingIsRefused,
		"unanswered":      TestUnansweredBytesAreCapped,
		"idle":            TestIdleTimeout,
		"unauthenticated": TestUnauthenticatedDeadline,
		"max clients":     TestMaxClients,
		"write timeout":   TestWriteTimeout,
		"close":           TestCloseEndsServeAndConnections,
	} {
		t.Run(name, test)
	}
}
