package node

import (
	"io"
	"net/http"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/leapcount/leapcount/httpapi"
)

// envoyproxy/ratelimit's HTTP endpoints (Config.RLSHTTP, set by `leapcount-node
// ratelimit`): /json and /healthcheck on the HTTP address, answering as its
// src/server does.

// withRLSHTTP serves /healthcheck (without the token, as /readyz) and /json (behind
// it, as /v1/*), and everything else with api.
func (n *Node) withRLSHTTP(api http.Handler) http.Handler {
	auth := httpapi.NewAuthorizer(n.cfg.Token, n.authLimiter)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthcheck":
			n.rlsHealthcheck(w)
		case r.URL.Path == "/json" && n.grpc != nil:
			if auth.Allow(w, r) {
				n.rlsJSON(w, r)
			}
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// rlsHealthcheck answers 200 "OK" while the gRPC front end is healthy (the node ready,
// rules with a domain loaded), else 500 with no body, as envoyproxy/ratelimit's.
func (n *Node) rlsHealthcheck(w http.ResponseWriter) {
	if !n.grpcReady() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Write([]byte("OK"))
}

// rlsJSON decides a RateLimitRequest in protobuf's JSON form and answers the
// RateLimitResponse in it: 200, 429 when over the limit, 500 when UNKNOWN; a request
// that cannot be read or decided is answered 400, as envoyproxy/ratelimit's.
func (n *Node) rlsJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n.cfg.MaxBodyBytes))
	var req rlspb.RateLimitRequest
	if err == nil {
		err = protojson.Unmarshal(body, &req)
	}
	var resp *rlspb.RateLimitResponse
	if err == nil {
		resp, err = n.grpc.ShouldRateLimit(r.Context(), &req)
	}
	if err != nil {
		n.cfg.Logger.Debug("/json request refused", "err", err)
		http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch resp.OverallCode {
	case rlspb.RateLimitResponse_UNKNOWN:
		w.WriteHeader(http.StatusInternalServerError)
	case rlspb.RateLimitResponse_OVER_LIMIT:
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

// Authorize guards h with the node's token (--token or --token-file), as /metrics
// and /debug/pprof/ are: for listeners a command serves beside the node.
func (n *Node) Authorize(h http.Handler) http.Handler {
	auth := httpapi.NewAuthorizer(n.cfg.Token, n.authLimiter)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Allow(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// MetricsHandler is the node's Prometheus metrics, as /metrics serves them (without
// the token: wrap it in Authorize).
func (n *Node) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg})
}
