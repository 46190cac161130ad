package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// traceHandler puts a node's warnings and errors into the run's trace, with the
// node's name: a failing seed's story then says what the node saw.
type traceHandler struct {
	n     *node
	attrs []slog.Attr
}

func (h traceHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || debugKey != "" && l >= slog.LevelDebug
}

func (h traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		if a.Key != "err" || debugKey != "" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.n.w.trace("%s: %s", h.n.name, b.String())
	return nil
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{n: h.n, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h traceHandler) WithGroup(string) slog.Handler { return h }
