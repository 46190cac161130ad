package cluster

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
)

// newStdLogger returns a *log.Logger, the kind memberlist takes, that forwards each
// line to l at the level memberlist wrote in its "[LEVEL] memberlist: ..." prefix, and
// counts in refutes the lines where memberlist refutes a claim that this member is
// suspect or dead.
func newStdLogger(l *slog.Logger, refutes *atomic.Uint64) *log.Logger {
	return log.New(slogWriter{l, refutes}, "", 0)
}

type slogWriter struct {
	l       *slog.Logger
	refutes *atomic.Uint64
}

// Write gets one whole line per call: log.Logger formats a message, then writes it.
func (w slogWriter) Write(p []byte) (int, error) {
	level, msg := parseLine(string(p))
	if level > slog.LevelDebug && strings.Contains(msg, "use of closed network connection") {
		// memberlist's own sockets, closed by Shutdown while its goroutines still
		// send: the stop is under way, not a fault (a graceful stop logs no error).
		level = slog.LevelDebug
	}
	// memberlist v0.7.0 keeps its incarnation unexported and has no hook for refuting;
	// these two messages are the only sign (state.go: suspectNode, deadNode).
	if w.refutes != nil && (strings.HasPrefix(msg, "Refuting a suspect message") || strings.HasPrefix(msg, "Refuting a dead message")) {
		w.refutes.Add(1)
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, msg)
	}
	return len(p), nil
}

// parseLine splits "[WARN] memberlist: message\n" into a level and "message".
// Lines without a known prefix are logged at Info, whole.
func parseLine(s string) (slog.Level, string) {
	s = strings.TrimRight(s, "\r\n")
	level := slog.LevelInfo
	if rest, ok := strings.CutPrefix(s, "["); ok {
		if tag, msg, ok := strings.Cut(rest, "]"); ok {
			if l, known := levels[tag]; known {
				level, s = l, strings.TrimLeft(msg, " ")
			}
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	return level, s
}

var levels = map[string]slog.Level{
	"TRACE": slog.LevelDebug,
	"DEBUG": slog.LevelDebug,
	"INFO":  slog.LevelInfo,
	"WARN":  slog.LevelWarn,
	"ERR":   slog.LevelError,
	"ERROR": slog.LevelError,
}
