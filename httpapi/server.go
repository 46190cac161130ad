package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/opmetrics"
)

// DefaultMaxBodyBytes caps a request body when Config.MaxBodyBytes is 0. A full batch
// of 1000 ops with 256-byte keys fits in well under half of it.
const DefaultMaxBodyBytes = 1 << 20

// Config is what New needs. Only Decider is required.
type Config struct {
	Decider      counter.Decider // decides the ops
	Limits       counter.Limits  // bounds checked before an op reaches Decider
	MaxBodyBytes int64           // request body cap; 0 means DefaultMaxBodyBytes

	// Token, when not empty, is required as "Authorization: Bearer <token>" on /v1/*
	// and /metrics (401 otherwise). /healthz and /readyz never need it, so probes
	// work without the secret.
	Token string
	// AuthLimiter limits wrong tokens per source address: a wrong token from a source
	// over its budget gets 429 with Retry-After (a right one passes). Give RESP the same one, so a
	// guesser has one budget. nil: a limiter of this server's own.
	AuthLimiter *authlimit.Limiter

	Ready   func() bool     // /readyz answers 200 when it returns true; nil: always ready
	Cluster func() any      // the JSON body of GET /v1/cluster; nil: the route is absent (404)
	HotKeys func(n int) any // the JSON body of GET /v1/hotkeys?n=N (the top N); nil: absent
	// ClusterHotKeys is the JSON body of GET /v1/hotkeys?scope=cluster&n=N: every
	// member's top N merged; nil: that scope is refused.
	ClusterHotKeys func(ctx context.Context, n int) any
	Status         func() any            // the JSON body of GET /v1/status (what /ui shows); nil: absent
	UI             http.Handler          // GET /ui, served without the token (it holds no data); nil: absent
	Metrics        http.Handler          // served at /metrics; nil: the route is absent (404)
	Registerer     prometheus.Registerer // where the request metrics go; nil: not registered
	Logger         *slog.Logger          // nil: discard
}

// route is what one path of the API serves: the method it takes, the name its
// metrics carry, whether it needs the token, and its handler.
type route struct {
	method string
	name   string
	auth   bool
	h      http.Handler
}

// server answers every request: it finds the route, checks method and token, and
// counts the request in the metrics under the route's name.
type server struct {
	cfg     Config
	auth    *Authorizer
	log     *slog.Logger
	routes  map[string]http.Handler // by path: guarded and instrumented
	unknown http.Handler            // 404s, instrumented under their own route name
	opErrs  *opmetrics.Errors
}

// New builds the handler. It fails when Decider is nil or the metrics cannot be
// registered (for example, a second server on the same Registerer).
func New(cfg Config) (http.Handler, error) {
	if cfg.Decider == nil {
		return nil, errors.New("httpapi: Config.Decider is nil")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s := &server{cfg: cfg, auth: NewAuthorizer(cfg.Token, cfg.AuthLimiter), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if s.opErrs, err = opmetrics.New(cfg.Registerer, "http"); err != nil {
		return nil, err
	}
	s.routes = make(map[string]http.Handler)
	for path, rt := range s.routeTable() {
		if rt.h != nil {
			s.routes[path] = m.instrument(rt.name, s.guard(rt))
		}
	}
	s.unknown = m.instrument("unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such path: "+r.URL.Path)
	}))
	return s, nil
}

func (s *server) routeTable() map[string]route {
	var cluster http.Handler
	if s.cfg.Cluster != nil {
		cluster = http.HandlerFunc(s.handleCluster)
	}
	var hot, status http.Handler
	if s.cfg.HotKeys != nil {
		hot = http.HandlerFunc(s.handleHotKeys)
	}
	if s.cfg.Status != nil {
		status = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.cfg.Status()) })
	}
	return map[string]route{
		"/v1/incr":    {http.MethodPost, "incr", true, s.opHandler(counter.Incr)},
		"/v1/count":   {http.MethodGet, "count", true, http.HandlerFunc(s.handleCount)},
		"/v1/allow":   {http.MethodPost, "allow", true, s.opHandler(counter.Allow)},
		"/v1/reset":   {http.MethodPost, "reset", true, s.opHandler(counter.Reset)},
		"/v1/batch":   {http.MethodPost, "batch", true, http.HandlerFunc(s.handleBatch)},
		"/v1/cluster": {http.MethodGet, "cluster", true, cluster},
		"/v1/hotkeys": {http.MethodGet, "hotkeys", true, hot},
		"/v1/status":  {http.MethodGet, "status", true, status},
		"/ui":         {http.MethodGet, "ui", false, s.cfg.UI},
		"/healthz":    {http.MethodGet, "healthz", false, http.HandlerFunc(s.handleHealthz)},
		"/readyz":     {http.MethodGet, "readyz", false, http.HandlerFunc(s.handleReadyz)},
		"/metrics":    {http.MethodGet, "metrics", true, s.cfg.Metrics},
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := s.routes[r.URL.Path]
	if !ok {
		h = s.unknown
	}
	h.ServeHTTP(w, r)
}

// guard checks the method and the token before the route's handler runs.
func (s *server) guard(rt route) http.Handler {
	allow := rt.method
	if rt.method == http.MethodGet {
		allow = "GET, HEAD" // net/http drops the body of a HEAD answer itself
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+rt.method)
			return
		}
		if rt.auth && !s.auth.Allow(w, r) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		rt.h.ServeHTTP(w, r)
	})
}

func (s *server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, statusResponse{Status: "ok"})
}

func (s *server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Ready != nil && !s.cfg.Ready() {
		writeError(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writeJSON(w, http.StatusOK, statusResponse{Status: "ready"})
}

func (s *server) handleCluster(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Cluster())
}

// maxHotKeys bounds n of GET /v1/hotkeys.
const maxHotKeys = 1000

func (s *server) handleHotKeys(w http.ResponseWriter, r *http.Request) {
	n := 20
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxHotKeys {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n must be a number from 1 to %d", maxHotKeys))
			return
		}
	}
	switch scope := r.URL.Query().Get("scope"); {
	case scope == "" || scope == "node":
		writeJSON(w, http.StatusOK, s.cfg.HotKeys(n))
	case scope == "cluster" && s.cfg.ClusterHotKeys != nil:
		writeJSON(w, http.StatusOK, s.cfg.ClusterHotKeys(r.Context(), n))
	default:
		writeError(w, http.StatusBadRequest, "scope must be node (the default) or cluster")
	}
}
