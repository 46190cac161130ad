package fallback

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RouteLogs sends go-redis's own lines (its pool's dial and reconnect messages) to l,
// as warnings, so that a node writes one structured stream. go-redis keeps one logger
// for the whole process: the last call wins.
func RouteLogs(l *slog.Logger) {
	redis.SetLogger(slogPrinter{l.With("component", "go-redis")})
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	p.l.WarnContext(ctx, fmt.Sprintf(format, v...))
}
