package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// Limits are the per-caller limits of a server command: what one
// authenticated identity (one token, one client certificate) may hold, so
// that one caller at its limits leaves the others unaffected. Zero fields
// mean no limit.
type Limits struct {
	// SessionsPerCaller bounds a caller's concurrent sessions; more
	// upgrades are refused with 429 Too Many Requests.
	SessionsPerCaller int
	// StreamsPerSession bounds the streams of one session (the peer's
	// stream credit, MAX_STREAMS): a compliant client waits for a slot, one
	// that opens beyond it gets GOAWAY STREAM_LIMIT_ERROR.
	StreamsPerSession int
	// DialsPerSecond bounds a caller's dials (tunnel targets, upstream
	// sessions of the gateway), with bursts of DialBurst (default
	// 2*DialsPerSecond, at least 1).
	DialsPerSecond float64
	DialBurst      int
	// BufferPerCaller bounds the bytes a caller can make the server buffer:
	// it is split between its SessionsPerCaller sessions as their receive
	// windows and send buffers (ApplyBuffer), which flow control enforces:
	// a caller at its share waits for credit, and one that sends beyond
	// its window gets FLOW_CONTROL_ERROR (counted by SessionEnded).
	BufferPerCaller int64
}

// Limit names, the label of wsmux_limit and wsmux_limit_refusals_total.
const (
	LimitSessions = "sessions_per_caller"
	LimitStreams  = "streams_per_session"
	LimitDials    = "dials_per_second"
	LimitBuffer   = "buffer_bytes_per_caller"
)

// LimitError is a refusal by a limit: Limit is one of the Limit constants,
// Detail says what the caller holds and what to do.
type LimitError struct {
	Limit  string
	Detail string
	// RetryAfter is when a retry may succeed (dial rate); 0 if unknown.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Detail }

// Reject answers 429 Too Many Requests with the refusal as plain text and,
// when known, Retry-After.
func (e *LimitError) Reject(w http.ResponseWriter) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter/time.Second)+1))
	}
	http.Error(w, "wsmux: "+e.Detail, http.StatusTooManyRequests)
}

// Limiter enforces Limits per caller and counts its refusals.
type Limiter struct {
	lim Limits
	now func() time.Time

	mu      sync.Mutex
	callers map[string]*caller

	refusals *prometheus.CounterVec
}

type caller struct {
	sessions int
	tokens   float64
	at       time.Time
}

// NewLimiter returns a Limiter for lim whose metrics (wsmux_limit, the
// configured values, and wsmux_limit_refusals_total, every label at 0 from
// the start) are registered on m.
func NewLimiter(lim Limits, m *Metrics) *Limiter {
	if lim.DialsPerSecond > 0 && lim.DialBurst <= 0 {
		lim.DialBurst = max(1, int(2*lim.DialsPerSecond))
	}
	l := &Limiter{lim: lim, now: time.Now, callers: map[string]*caller{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_limit_refusals_total",
			Help: "Requests, streams and dials refused by a per-caller limit (streams_per_session: a session reached its stream credit; buffer_bytes_per_caller: a session ended for sending beyond the windows the limit sized).",
		}, []string{"limit"}),
	}
	conf := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wsmux_limit", Help: "Configured per-caller limits (0: none).",
	}, []string{"limit"})
	conf.WithLabelValues(LimitSessions).Set(float64(lim.SessionsPerCaller))
	conf.WithLabelValues(LimitStreams).Set(float64(lim.StreamsPerSession))
	conf.WithLabelValues(LimitDials).Set(lim.DialsPerSecond)
	conf.WithLabelValues(LimitBuffer).Set(float64(lim.BufferPerCaller))
	for _, n := range []string{LimitSessions, LimitStreams, LimitDials, LimitBuffer} {
		l.refusals.WithLabelValues(n)
	}
	if m != nil {
		m.Registry.MustRegister(conf, l.refusals)
	}
	return l
}

// Limits returns the configured limits.
func (l *Limiter) Limits() Limits { return l.lim }

func (l *Limiter) get(who string) *caller {
	c := l.callers[who]
	if c == nil {
		c = &caller{tokens: float64(l.lim.DialBurst), at: l.now()}
		l.callers[who] = c
	}
	return c
}

// forget drops an idle caller's state (no session, a full dial bucket).
func (l *Limiter) forget(who string, c *caller) {
	if c.sessions == 0 && (l.lim.DialsPerSecond <= 0 || c.tokens >= float64(l.lim.DialBurst)) {
		delete(l.callers, who)
	}
}

// AcquireSession takes one of who's sessions, or returns a *LimitError.
// release gives it back (once the session ended).
func (l *Limiter) AcquireSession(who string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(who)
	if n := l.lim.SessionsPerCaller; n > 0 && c.sessions >= n {
		l.refusals.WithLabelValues(LimitSessions).Inc()
		return nil, &LimitError{Limit: LimitSessions, Detail: fmt.Sprintf(
			"caller %s already has %d session(s), the limit per caller (--max-sessions-per-caller): close one first", who, c.sessions)}
	}
	c.sessions++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			c.sessions--
			l.forget(who, c)
		})
	}, nil
}

// AllowDial takes one of who's dial tokens, or returns a *LimitError.
func (l *Limiter) AllowDial(who string) error {
	if l.lim.DialsPerSecond <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(who)
	now := l.now()
	c.tokens = min(float64(l.lim.DialBurst), c.tokens+now.Sub(c.at).Seconds()*l.lim.DialsPerSecond)
	c.at = now
	if c.tokens < 1 {
		l.refusals.WithLabelValues(LimitDials).Inc()
		wait := time.Duration((1 - c.tokens) / l.lim.DialsPerSecond * float64(time.Second))
		return &LimitError{Limit: LimitDials, RetryAfter: wait, Detail: fmt.Sprintf(
			"caller %s dials faster than %g a second (--max-dials-per-second): retry in %s", who, l.lim.DialsPerSecond,
			wait.Round(time.Millisecond))}
	}
	c.tokens--
	l.forget(who, c)
	return nil
}

// SessionEnded counts a wsmux session that ended with err as a refusal by
// LimitBuffer when the caller sent beyond the receive windows the buffer
// limit sized: a FLOW_CONTROL_ERROR detected here (not one the peer
// reported). A caller that stays within them is only ever held: its
// writes wait for credit.
func (l *Limiter) SessionEnded(err error) {
	var se *mux.SessionError
	if l.lim.BufferPerCaller > 0 && errors.As(err, &se) && !se.Remote && se.Code == frame.FlowControlError {
		l.refusals.WithLabelValues(LimitBuffer).Inc()
	}
}

// Refused counts a refusal by the limit named limit decided elsewhere (a
// fleet's shared counters).
func (l *Limiter) Refused(limit string) { l.refusals.WithLabelValues(limit).Inc() }

// StreamLimitReached counts a session that just reached its stream limit
// (its next opens wait for a slot).
func (l *Limiter) StreamLimitReached() { l.refusals.WithLabelValues(LimitStreams).Inc() }

// ApplyBuffer sets cfg's stream limit and sizes its windows and send
// buffers so that a caller's sessions together buffer at most
// BufferPerCaller (plus the frames in flight).
func (l *Limiter) ApplyBuffer(cfg *mux.Config) {
	if n := l.lim.StreamsPerSession; n > 0 {
		cfg.MaxStreams = n
	}
	if l.lim.BufferPerCaller <= 0 {
		return
	}
	per := l.lim.BufferPerCaller / int64(max(1, l.lim.SessionsPerCaller))
	def := mux.DefaultConfig()
	// Half for what the caller sends us (receive windows), half for what
	// we queue toward it (send buffers).
	recv := int(min(per/2, int64(def.MaxSessionWindow)))
	send := int(min(per/2, int64(def.SessionSendBuffer)))
	recv = max(recv, 128<<10)
	send = max(send, 64<<10)
	cfg.MaxSessionWindow = recv
	cfg.InitialSessionWindow = min(def.InitialSessionWindow, recv)
	cfg.MaxStreamWindow = max(64<<10, min(def.MaxStreamWindow, recv/2))
	cfg.InitialStreamWindow = min(def.InitialStreamWindow, cfg.MaxStreamWindow)
	cfg.SessionSendBuffer = send
	cfg.StreamSendBuffer = min(def.StreamSendBuffer, send)
}
