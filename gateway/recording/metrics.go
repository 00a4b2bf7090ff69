package recording

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what the recorder did; every name starts with
// wsmux_recording.
type Metrics struct {
	// Recordings counts recordings started, by kind (exec, attach,
	// portforward).
	Recordings *prometheus.CounterVec
	// Bytes counts the bytes handed to sinks (headers, events, records).
	Bytes prometheus.Counter
	// Dropped counts session bytes left out of recordings, by reason:
	// rate and size (the per-session bounds), buffer (the sink fell
	// behind), failed (the sink had failed).
	Dropped *prometheus.CounterVec
	// SinkFailures counts sink failures, by stage: open (the recording
	// could not start), write, close.
	SinkFailures *prometheus.CounterVec
	// Refused counts sessions refused or ended because their recording
	// was required and failed (--recording-required), by stage.
	Refused *prometheus.CounterVec
}

// NewMetrics returns the recorder's metrics registered on reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Recordings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_recordings_total", Help: "Session recordings started, by kind (exec, attach, portforward).",
		}, []string{"kind"}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wsmux_recording_bytes_total", Help: "Bytes of recordings handed to the sink.",
		}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_recording_dropped_bytes_total", Help: "Session bytes left out of recordings, by reason (rate, size: the per-session bounds; buffer: the sink fell behind; failed: the sink had failed).",
		}, []string{"reason"}),
		SinkFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_recording_sink_failures_total", Help: "Recording sink failures, by stage (open, write, close).",
		}, []string{"stage"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_recording_refused_sessions_total", Help: "Sessions refused (open) or ended (write) because their required recording failed.",
		}, []string{"stage"}),
	}
	for _, k := range []string{"exec", "attach", "portforward"} {
		m.Recordings.WithLabelValues(k)
	}
	for _, r := range []string{"rate", "size", "buffer", "failed"} {
		m.Dropped.WithLabelValues(r)
	}
	for _, s := range []string{"open", "write", "close"} {
		m.SinkFailures.WithLabelValues(s)
	}
	for _, s := range []string{"open", "write"} {
		m.Refused.WithLabelValues(s)
	}
	if reg != nil {
		reg.MustRegister(m.Recordings, m.Bytes, m.Dropped, m.SinkFailures, m.Refused)
	}
	return m
}
