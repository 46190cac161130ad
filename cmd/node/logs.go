package main

import (
	"bytes"
	"context"
	"log/slog"

	"google.golang.org/grpc/grpclog"

	"github.com/leapcount/leapcount/fallback"
)

// routeLibraryLogs makes logger the one stream of the process: Go's log package (and
// slog's default), go-redis's logger and gRPC's all write through it (memberlist's
// lines go through it in package cluster).
func routeLibraryLogs(logger *slog.Logger) {
	slog.SetDefault(logger)
	fallback.RouteLogs(logger)
	grpcLog := logger.With("component", "grpc")
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(lineWriter{grpcLog, slog.LevelDebug},
		lineWriter{grpcLog, slog.LevelWarn}, lineWriter{grpcLog, slog.LevelError}))
}

// lineWriter logs each line written to it at one level.
type lineWriter struct {
	l     *slog.Logger
	level slog.Level
}

func (w lineWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(line) > 0 {
			w.l.Log(context.Background(), w.level, string(line))
		}
	}
	return len(p), nil
}
