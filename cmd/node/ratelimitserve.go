package main

import (
	"expvar"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/leapcount/leapcount/node"
)

// The listeners `leapcount-node ratelimit` serves beside the node, as
// envoyproxy/ratelimit does: the debug one (DEBUG_HOST/DEBUG_PORT) and Prometheus's
// (USE_PROMETHEUS). Both are behind the node's token when it has one.

// hooks are the node hooks of the mapping: envoyproxy/ratelimit's /json and
// /healthcheck on the HTTP address, and the listeners beside it.
func (m *rlMapping) hooks() nodeHooks {
	return nodeHooks{
		adjust: func(c *node.Config) { c.RLSHTTP, c.LimitsXDS = true, m.xds },
		serve:  m.serveBeside,
	}
}

// serveBeside starts the debug and Prometheus listeners; the function it returns
// closes them.
func (m *rlMapping) serveBeside(n *node.Node, logger *slog.Logger) (func(), error) {
	var servers []*http.Server
	stop := func() {
		for _, s := range servers {
			s.Close()
		}
	}
	type listener struct {
		what, vars, addr string
		h                http.Handler
	}
	ls := []listener{{"debug", "DEBUG_HOST/DEBUG_PORT", m.debugAddr, debugMux()}}
	if m.promAddr != "" {
		mux := http.NewServeMux()
		mux.Handle(m.promPath, n.MetricsHandler())
		ls = append(ls, listener{"prometheus", "PROMETHEUS_ADDR", m.promAddr, mux})
	}
	for _, l := range ls {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("invalid %s %s: %v", l.vars, l.addr, err)
		}
		s := &http.Server{Handler: n.Authorize(l.h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
		servers = append(servers, s)
		go s.Serve(ln)
		logger.Info("ratelimit listener serving", "listener", l.what, "addr", ln.Addr().String())
	}
	return stop, nil
}

// debugMux is envoyproxy/ratelimit's debug listener: Go's profiler under
// /debug/pprof/, /stats (Go's expvar values, a line each), and / listing them.
func debugMux() http.Handler {
	endpoints := map[string]string{
		"/debug/pprof/":        "root of various pprof endpoints. hit for help.",
		"/debug/pprof/profile": "CPU profiling endpoint",
		"/debug/pprof/trace":   "trace endpoint",
		"/stats":               "print out stats",
	}
	mux := http.NewServeMux()
	node.HandlePprof(mux)
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		expvar.Do(func(kv expvar.KeyValue) { fmt.Fprintf(w, "%s: %s\n", kv.Key, kv.Value) })
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		paths := make([]string, 0, len(endpoints))
		for p := range endpoints {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			io.WriteString(w, p+": "+endpoints[p]+"\n")
		}
	})
	return mux
}
