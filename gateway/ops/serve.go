package ops

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// TLSCert and TLSKey, when set, serve HTTPS.
	TLSCert, TLSKey string
	// RequestClientCert asks TLS clients for a certificate (verified by the
	// application against its CA, so a bad one gets a clear 401).
	RequestClientCert bool
	// ShutdownTimeout bounds the drain after ctx ends: GOAWAY to every
	// session, wait for their streams to finish, then close what is left.
	ShutdownTimeout time.Duration
	// Abort, when closed during the drain (a second SIGINT or SIGTERM),
	// ends it at once: the remaining sessions are closed.
	Abort <-chan struct{}
	// Certificate, when set, is used instead of loading TLSCert/TLSKey
	// (callers that checked the pair before logging that they serve).
	Certificate *tls.Certificate
	Logger      *slog.Logger
	// Conns bounds the listener's connections (zero fields: defaults).
	Conns ConnLimits
	// Metrics, when set, receives the listener's
	// wsmux_connections_open{listener="http"} and
	// wsmux_connections_refused_total{listener="http"}.
	Metrics *Metrics
}

// AbortedError is Serve's result when the shutdown had to close sessions
// that were still running: the drain deadline passed or Abort was closed.
type AbortedError struct {
	Sessions, Streams int    // closed sessions, and their open wsmux streams
	Reason            string // "drain deadline passed" or "second signal"
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("shutdown aborted %d session(s) with %d open stream(s): %s", e.Sessions, e.Streams, e.Reason)
}

// Health is /healthz: 200 "ok" while serving, 503 while shutting down.
type Health struct{ stopping atomic.Bool }

// Stopping reports whether the server is shutting down.
func (h *Health) Stopping() bool { return h.stopping.Load() }

// SetStopping marks the server as shutting down.
func (h *Health) SetStopping() { h.stopping.Store(true) }

func (h *Health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if h.stopping.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Serve serves handler on ln until ctx ends, with opts.Conns bounding its
// connections (the live sessions of tracker count against MaxConns), then
// shuts down gracefully:
// health turns 503, the listener closes, idle HTTP connections close, and
// every tracked session gets a GOAWAY and ShutdownTimeout to finish before
// it is closed. It returns nil after a shutdown, or the serving error.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler, opts ServerOptions, tracker *Tracker, health *Health) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := opts.Conns.Validate(); err != nil {
		return err
	}
	conns := opts.Conns.WithDefaults()
	var held func() int
	if tracker != nil {
		held = tracker.Len
	}
	gate, err := NewConnGate("http", conns.MaxConns, held, opts.Metrics, log)
	if err != nil {
		return err
	}
	ln, hook := LimitListener(ln, gate) // under TLS: a refused connection costs no handshake
	srv := &http.Server{
		Handler:   handler,
		ErrorLog:  slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState: hook,
	}
	conns.Apply(srv)
	if opts.TLSCert != "" || opts.Certificate != nil {
		cert := opts.Certificate
		if cert == nil {
			c, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
			if err != nil {
				return err
			}
			cert = &c
		}
		cfg := &tls.Config{
			Certificates: []tls.Certificate{*cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"}, // upgrades need HTTP/1.1
		}
		if opts.RequestClientCert {
			cfg.ClientAuth = tls.RequestClientCert
		}
		ln = tls.NewListener(ln, cfg)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	timeout := opts.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sessions, streams := tracker.Open()
	log.Info("shutting down: no new sessions, GOAWAY to the open ones", "drain_timeout", timeout,
		"sessions", sessions, "streams", streams)
	if health != nil {
		health.SetStopping()
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reason := "drain deadline passed"
	var bySignal atomic.Bool
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-opts.Abort:
			bySignal.Store(true)
			cancel()
		case <-stopWatch:
		}
	}()
	done := make(chan bool, 1)
	go func() { done <- tracker.Drain(sctx) }()
	_ = srv.Shutdown(sctx) // hijacked (upgraded) connections are the tracker's
	var aborted error
	if !<-done {
		if bySignal.Load() {
			reason = "second signal"
		}
		n, st := tracker.Aborted()
		log.Warn("shutdown: closed the sessions still running", "reason", reason, "timeout", timeout,
			"sessions", n, "streams", st)
		if n > 0 {
			aborted = &AbortedError{Sessions: n, Streams: st, Reason: reason}
		}
	}
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("shutdown complete")
	return aborted
}
