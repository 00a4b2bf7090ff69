// Package recording records the gateway's exec, attach and port-forward
// sessions. Exec and attach sessions become asciicast v2 streams (the
// asciinema format, docs/gateway.md): a header with who did what where,
// then timed output ("o"), resize ("r"), stdin ("i", only when the policy
// asks for it), stderr of sessions without a terminal ("e") and marker
// ("m") events. A port-forward session becomes a metadata record: its
// ports, the bytes each way and its duration, never its bytes.
//
// A Recorder hands each recording to a Sink (a directory, one file per
// session written as it runs; or an HTTP collector, one streaming POST per
// session). Recording never blocks a session: events go through a bounded
// buffer to a goroutine that writes them; each session's recording is
// bounded in rate and size, and what goes over a bound is left out and
// marked. With Config.Required a recording that cannot start refuses the
// session and one whose sink fails ends it (Session.Failed).
//
// It imports the controller types and Prometheus; it must not import the
// gateway (which imports it), testing or the test helpers.
package recording

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/wsmux/wsmux/controller"
)

// Defaults of Config's bounds.
const (
	DefaultMaxBytes     = 64 << 20  // per session
	DefaultRate         = 256 << 10 // bytes per second, per session
	DefaultBurst        = 1 << 20   // bytes above the rate at once
	DefaultBuffer       = 1 << 20   // bytes waiting for the sink, per session
	DefaultOpenTimeout  = 10 * time.Second
	DefaultCloseTimeout = 10 * time.Second
)

// Meta describes a recorded session; it is the header of its recording.
type Meta struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"` // exec, attach or portforward
	Caller      string    `json:"caller"`
	User        string    `json:"user,omitempty"`
	UID         string    `json:"uid,omitempty"`
	Groups      []string  `json:"groups,omitempty"`
	Cluster     string    `json:"cluster,omitempty"`
	Namespace   string    `json:"namespace"`
	Pod         string    `json:"pod"`
	Container   string    `json:"container,omitempty"`
	Command     []string  `json:"command,omitempty"`
	TTY         bool      `json:"tty"`
	Stdin       bool      `json:"stdin_recorded"`
	Protocol    string    `json:"protocol,omitempty"`
	Remote      string    `json:"remote,omitempty"`
	Start       time.Time `json:"start"`
	ContentType string    `json:"-"` // set by Start: what the sink receives
}

// Content types of recordings.
const (
	ContentCast        = "application/x-asciicast"
	ContentPortForward = "application/x-ndjson"
)

// Config configures a Recorder. Zero bounds take the defaults above.
type Config struct {
	// Sink receives the recordings.
	Sink Sink
	// Policy says which sessions are recorded (and with stdin) and who
	// may replay them. nil or holding none: every session is recorded,
	// stdin only with Stdin, and nobody may replay.
	Policy *PolicyStore
	// Stdin records stdin of every recorded session when there is no
	// policy.
	Stdin bool
	// Required fails closed: a session whose recording cannot start is
	// refused, and one whose recording fails is ended.
	Required bool
	// Cluster names the cluster in recordings' headers.
	Cluster string
	// MaxBytes bounds what a session's recording keeps of its streams;
	// past it, events are left out and the recording says so once.
	MaxBytes int64
	// Rate bounds the bytes a session's recording takes per second, with
	// Burst above it at once; what goes over is left out and marked.
	Rate, Burst int64
	// Buffer bounds the bytes of a session's events waiting for the
	// sink; past it, events are left out and marked (with Required, the
	// session ends: its recording would have a hole).
	Buffer int
	// OpenTimeout bounds Sink.Open, CloseTimeout the final flush.
	OpenTimeout, CloseTimeout time.Duration
	// Metrics counts recordings; nil: NewMetrics(nil).
	Metrics *Metrics
}

// Validate fills in the defaults and checks the bounds.
func (c *Config) Validate() error {
	if c.Sink == nil {
		return errors.New("recording: no sink")
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxBytes, DefaultMaxBytes)
	def(&c.Rate, DefaultRate)
	def(&c.Burst, DefaultBurst)
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.MaxBytes < 0 || c.Rate < 0 || c.Burst < 0 || c.Buffer < 0 || c.OpenTimeout < 0 || c.CloseTimeout < 0 {
		return errors.New("recording: negative bound")
	}
	if c.Buffer < 4<<10 {
		return fmt.Errorf("recording: buffer of %d bytes: want at least 4096", c.Buffer)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return nil
}

// Recorder starts the recordings of sessions.
type Recorder struct {
	cfg Config
}

// New validates cfg and returns a Recorder.
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Recorder{cfg: cfg}, nil
}

// Required reports whether recordings fail closed.
func (r *Recorder) Required() bool { return r.cfg.Required }

// Metrics returns the recorder's metrics.
func (r *Recorder) Metrics() *Metrics { return r.cfg.Metrics }

// Cluster is the cluster name recordings carry.
func (r *Recorder) Cluster() string { return r.cfg.Cluster }

// Library returns the sink as a Library when it is one (DirSink), for
// replay; nil otherwise.
func (r *Recorder) Library() Library {
	l, _ := r.cfg.Sink.(Library)
	return l
}

// Policy returns the current policy (nil: none).
func (r *Recorder) Policy() *Policy {
	if r.cfg.Policy == nil {
		return nil
	}
	return r.cfg.Policy.Get()
}

// Decide says whether the session of u on t is recorded.
func (r *Recorder) Decide(u controller.User, t controller.Target) Decision {
	if p := r.Policy(); p != nil {
		return p.Decide(u, t)
	}
	return Decision{Record: true, Stdin: r.cfg.Stdin}
}

// MayAudit reports whether u may list and replay recordings (never without
// a policy).
func (r *Recorder) MayAudit(u controller.User) bool {
	p := r.Policy()
	return p != nil && p.MayAudit(u)
}

// OpenError is a recording that could not start.
type OpenError struct{ Err error }

func (e *OpenError) Error() string {
	return "recording: the sink cannot take the recording: " + e.Err.Error()
}
func (e *OpenError) Unwrap() error { return e.Err }

// Start opens the recording of the session m (its ID and Start are set
// when empty). Its error is an *OpenError; with Required the caller must
// then refuse the session.
func (r *Recorder) Start(ctx context.Context, m Meta) (*Session, error) {
	if m.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		m.ID = hex.EncodeToString(b[:])
	}
	if m.Start.IsZero() {
		m.Start = time.Now()
	}
	if m.Cluster == "" {
		m.Cluster = r.cfg.Cluster
	}
	m.ContentType = ContentCast
	if m.Kind == "portforward" {
		m.ContentType = ContentPortForward
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.OpenTimeout)
	defer cancel()
	w, err := r.cfg.Sink.Open(ctx, m)
	if err != nil {
		r.cfg.Metrics.SinkFailures.WithLabelValues("open").Inc()
		if r.cfg.Required {
			r.cfg.Metrics.Refused.WithLabelValues("open").Inc()
		}
		return nil, &OpenError{Err: err}
	}
	r.cfg.Metrics.Recordings.WithLabelValues(m.Kind).Inc()
	return newSession(r, m, w), nil
}
