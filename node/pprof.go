package node

import (
	"crypto/subtle"
	"net/http"
	"net/http/pprof"
	"strings"
)

// withPprof serves Go's profiler under /debug/pprof/ (with --pprof), behind the token
// when one is set, and everything else with api.
func withPprof(api http.Handler, token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			api.ServeHTTP(w, r)
			return
		}
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			http.Error(w, `{"error":"missing or wrong token"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
