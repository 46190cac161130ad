package node

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/leapcount/leapcount/httpapi"
)

// withPprof serves Go's profiler under /debug/pprof/ (with --pprof), behind auth (the
// token, when one is set), and everything else with api.
func withPprof(api http.Handler, auth *httpapi.Authorizer) http.Handler {
	mux := http.NewServeMux()
	HandlePprof(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			api.ServeHTTP(w, r)
			return
		}
		if auth.Allow(w, r) {
			mux.ServeHTTP(w, r)
		}
	})
}

// HandlePprof serves Go's profiler on mux under /debug/pprof/.
func HandlePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
