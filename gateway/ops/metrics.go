// Package ops holds what wsmux's server commands share: Prometheus metrics,
// the registry of live sessions (for metrics and graceful shutdown), and an
// HTTP server that drains sessions on shutdown.
//
// It imports mux, frame and Prometheus; it must not import the other command
// packages (they import it), testing or the test helpers.
package ops

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// Metrics are a server command's Prometheus metrics; every name starts
// with wsmux_.
type Metrics struct {
	Registry *prometheus.Registry
	// AuthFailures counts rejected callers by reason (auth.Reason...).
	AuthFailures *prometheus.CounterVec
	// BadRequests counts requests rejected before authentication mattered
	// or after it (malformed paths, not an upgrade...), by reason.
	BadRequests *prometheus.CounterVec
	// TunnelRefused counts tunnel streams refused, by reason
	// (not_allowed, dial_failed, bad_request).
	TunnelRefused *prometheus.CounterVec
	// TunnelBytes counts tunnelled payload bytes, by direction
	// (to_target, from_target).
	TunnelBytes *prometheus.CounterVec
	// Upgrades counts accepted upgrades by protocol and kind.
	Upgrades *prometheus.CounterVec
	// Reloads counts loads of watched files (the first one included), by
	// file and result (success, failure: the previous contents stay).
	Reloads *prometheus.CounterVec
	// Resumes counts resume requests of wsmux sessions, by outcome
	// (resumed, unknown, forbidden, conflict, rate_limited, retry, failed).
	Resumes *prometheus.CounterVec
	// ConnsRefused counts connections closed at accept because their
	// listener held its limit (ConnLimits.MaxConns), by listener.
	ConnsRefused *prometheus.CounterVec

	Sessions *Tracker
}

// NewMetrics returns metrics registered on a fresh registry (with the Go
// and process collectors).
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_auth_failures_total", Help: "Requests rejected with 401, by reason.",
		}, []string{"reason"}),
		BadRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_bad_requests_total", Help: "Requests rejected as malformed (400), by reason.",
		}, []string{"reason"}),
		TunnelRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_tunnel_refused_total", Help: "Tunnel streams refused, by reason.",
		}, []string{"reason"}),
		TunnelBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_tunnel_bytes_total", Help: "Tunnelled TCP payload bytes, by direction.",
		}, []string{"direction"}),
		Upgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_upgrades_total", Help: "Accepted upgrades, by protocol (wsmux, spdy) and kind.",
		}, []string{"protocol", "kind"}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_reloads_total", Help: "Loads of watched files (token file, policy file...), by file and result; a failure keeps the previous contents.",
		}, []string{"file", "result"}),
		Resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_resumes_total", Help: "Resume requests of suspended wsmux sessions, by outcome (resumed; unknown: 404, the session is not held here; forbidden; conflict; rate_limited; retry; failed).",
		}, []string{"outcome"}),
		ConnsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_connections_refused_total", Help: "Connections closed at accept because their listener held its limit (--max-connections), by listener.",
		}, []string{"listener"}),
		Sessions: NewTracker(),
	}
	// Every label known in advance exists from the start, at 0: a
	// dashboard or alert sees the series before the first event.
	for _, r := range []string{"missing_credentials", "invalid_token", "invalid_client_certificate", "malformed_authorization", "token_review_failed"} {
		m.AuthFailures.WithLabelValues(r)
	}
	for _, r := range []string{"bad_path", "not_upgrade", "no_protocol", "bad_upgrade", "ambiguous_credentials", "cross_origin"} {
		m.BadRequests.WithLabelValues(r)
	}
	for _, r := range []string{"bad_request", "not_allowed", "dial_failed", "rate_limited"} {
		m.TunnelRefused.WithLabelValues(r)
	}
	for _, o := range []string{"resumed", "unknown", "forbidden", "conflict", "rate_limited", "retry", "failed"} {
		m.Resumes.WithLabelValues(o)
	}
	for _, d := range []string{"to_target", "from_target"} {
		m.TunnelBytes.WithLabelValues(d)
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.AuthFailures, m.BadRequests, m.TunnelRefused, m.TunnelBytes, m.Upgrades, m.Reloads, m.Resumes, m.ConnsRefused,
		sessionCollector{m.Sessions},
	)
	return m
}

// ReloadHook returns the function a file reloader calls with each
// outcome, counting it under file ("token_file", "policy_file"); both
// results exist at 0 from this call.
func (m *Metrics) ReloadHook(file string) func(error) {
	ok, failed := m.Reloads.WithLabelValues(file, "success"), m.Reloads.WithLabelValues(file, "failure")
	return func(err error) {
		if err != nil {
			failed.Inc()
			return
		}
		ok.Inc()
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

var (
	descSessionsActive = prometheus.NewDesc("wsmux_sessions_active", "Live sessions, by protocol.", []string{"protocol"}, nil)
	descSessionsTotal  = prometheus.NewDesc("wsmux_sessions_total", "Sessions started, by protocol.", []string{"protocol"}, nil)
	descStreamsActive  = prometheus.NewDesc("wsmux_streams_active", "Streams of live wsmux sessions not yet ended both ways.", nil, nil)
	descStreamsTotal   = prometheus.NewDesc("wsmux_streams_total", "wsmux streams, by who opened them (local, remote).", []string{"opened_by"}, nil)
	descBytes          = prometheus.NewDesc("wsmux_bytes_total", "wsmux WebSocket payload bytes, by direction (in, out).", []string{"direction"}, nil)
	descResets         = prometheus.NewDesc("wsmux_stream_resets_total", "wsmux RST_STREAM frames, by direction (sent, received).", []string{"direction"}, nil)
	descSuspended      = prometheus.NewDesc("wsmux_sessions_suspended", "Live wsmux sessions whose connection dropped, waiting for their client to resume them.", nil, nil)
	descSuspends       = prometheus.NewDesc("wsmux_suspensions_total", "Connections lost by resumable wsmux sessions (each suspended the session), and the resumes that followed, by event (suspended, resumed).", []string{"event"}, nil)
	descErrors         = prometheus.NewDesc("wsmux_errors_total", "wsmux session and stream errors by code (protocol errors, timeouts, resets with a code; detected here or reported by the peer).", []string{"code"}, nil)
)

// sessionCollector reports the tracker's sums: the counters of ended
// sessions plus the current counters of live ones.
type sessionCollector struct{ t *Tracker }

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessionsActive, descSessionsTotal, descStreamsActive, descStreamsTotal, descBytes, descResets, descSuspended, descSuspends, descErrors} {
		ch <- d
	}
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.t.snapshot()
	for _, p := range []string{"wsmux", "spdy"} {
		ch <- prometheus.MustNewConstMetric(descSessionsActive, prometheus.GaugeValue, float64(snap.active[p]), p)
		ch <- prometheus.MustNewConstMetric(descSessionsTotal, prometheus.CounterValue, float64(snap.total[p]), p)
	}
	ch <- prometheus.MustNewConstMetric(descStreamsActive, prometheus.GaugeValue, float64(snap.streamsActive))
	ch <- prometheus.MustNewConstMetric(descStreamsTotal, prometheus.CounterValue, float64(snap.stats.StreamsOpened), "local")
	ch <- prometheus.MustNewConstMetric(descStreamsTotal, prometheus.CounterValue, float64(snap.stats.StreamsAccepted), "remote")
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(snap.stats.BytesIn), "in")
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(snap.stats.BytesOut), "out")
	ch <- prometheus.MustNewConstMetric(descResets, prometheus.CounterValue, float64(snap.stats.ResetsLocal), "sent")
	ch <- prometheus.MustNewConstMetric(descResets, prometheus.CounterValue, float64(snap.stats.ResetsRemote), "received")
	ch <- prometheus.MustNewConstMetric(descSuspended, prometheus.GaugeValue, float64(snap.suspended))
	ch <- prometheus.MustNewConstMetric(descSuspends, prometheus.CounterValue, float64(snap.stats.Suspends), "suspended")
	ch <- prometheus.MustNewConstMetric(descSuspends, prometheus.CounterValue, float64(snap.stats.Resumes), "resumed")
	for code := frame.NoError + 1; code <= frame.MemoryLimit; code++ {
		if name := code.String(); !strings.HasPrefix(name, "UNKNOWN_") {
			ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(snap.stats.Errors[code]), name)
		}
	}
	for code, n := range snap.stats.Errors {
		if code > frame.MemoryLimit || code == frame.NoError {
			ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(n), code.String())
		}
	}
}

// addStats adds b into a.
func addStats(a *mux.Stats, b mux.Stats) {
	a.BytesIn += b.BytesIn
	a.BytesOut += b.BytesOut
	a.FramesIn += b.FramesIn
	a.FramesOut += b.FramesOut
	a.MessagesIn += b.MessagesIn
	a.MessagesOut += b.MessagesOut
	a.StreamsOpened += b.StreamsOpened
	a.StreamsAccepted += b.StreamsAccepted
	a.ResetsLocal += b.ResetsLocal
	a.ResetsRemote += b.ResetsRemote
	a.Suspends += b.Suspends
	a.Resumes += b.Resumes
	if a.Errors == nil {
		a.Errors = map[frame.ErrorCode]uint64{}
	}
	for k, v := range b.Errors {
		a.Errors[k] += v
	}
}

// Value returns the current value of a counter or gauge (for tests and
// logs).
func Value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// ResumeOutcome is the Resumes label of a resume refused with status.
func ResumeOutcome(status int) string {
	switch status {
	case http.StatusNotFound:
		return "unknown"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusConflict:
		return "conflict"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "retry"
	}
	return "failed"
}
