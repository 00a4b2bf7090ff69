package ops

import (
	"net/http"
	"net/http/pprof"
)

// WithPprof serves Go's profiles (net/http/pprof) under /debug/pprof/ and
// everything else with h. They need no authentication, like /metrics: it
// is opt-in (--pprof).
func WithPprof(h http.Handler) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.Handle("/", h)
	return m
}
