package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestParseLine(t *testing.T) {
	cases := []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5\n", slog.LevelDebug, "Stream connection from=127.0.0.1:5"},
		{"[INFO] memberlist: Marking n2 as failed\n", slog.LevelInfo, "Marking n2 as failed"},
		{"[WARN] memberlist: Refuting a suspect message\n", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to send ping\n", slog.LevelError, "Failed to send ping"},
		{"[ERR] Failed to shutdown transport: x\n", slog.LevelError, "Failed to shutdown transport: x"},
		{"no prefix at all\n", slog.LevelInfo, "no prefix at all"},
		{"[ODD] memberlist: x", slog.LevelInfo, "[ODD] memberlist: x"},
	}
	for _, c := range cases {
		level, msg := parseLine(c.in)
		if level != c.level || msg != c.msg {
			t.Errorf("parseLine(%q) = %v, %q; want %v, %q", c.in, level, msg, c.level, c.msg)
		}
	}
}

func TestStdLoggerForwardsAtLevel(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var refutes atomic.Uint64
	std := newStdLogger(l, &refutes)
	std.Printf("[DEBUG] memberlist: hidden")
	std.Printf("[WARN] memberlist: shown %d", 1)
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, `msg="shown 1"`) {
		t.Fatalf("got log %q; want only the WARN line", out)
	}
	// memberlist's words when it refutes a claim about this member (state.go).
	std.Printf("[WARN] memberlist: Refuting a suspect message (from: %s)", "b")
	std.Printf("[WARN] memberlist: Refuting a dead message (from: %s)", "c")
	std.Printf("[WARN] memberlist: Refuting an alive message for 'x'")
	if got := refutes.Load(); got != 2 {
		t.Fatalf("refutes: got %d; want 2", got)
	}
	// A send on a socket Shutdown closed is the stop, not a fault: Debug, not ERROR.
	buf.Reset()
	std.Printf("[ERR] memberlist: Failed to send gossip to 127.0.0.1:1: write udp 127.0.0.1:2->127.0.0.1:1: use of closed network connection")
	std.Printf("[ERR] memberlist: Failed to send gossip to 127.0.0.1:1: no route to host")
	if out := buf.String(); strings.Contains(out, "closed network") || !strings.Contains(out, "no route to host") {
		t.Fatalf("got log %q; want only the real error", out)
	}
}
