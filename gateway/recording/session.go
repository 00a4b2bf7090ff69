package recording

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// Event codes of a cast: the asciicast v2 ones, and "e" for the stderr of
// sessions without a terminal.
const (
	codeOutput = 'o'
	codeStderr = 'e'
	codeInput  = 'i'
	codeResize = 'r'
	codeMarker = 'm'
	codeEnd    = 0 // the final record of a port-forward
)

// ErrBehind is a required recording whose sink fell behind its bounded
// buffer: the recording would have a hole, so the session ends.
var ErrBehind = errors.New("recording: the sink fell behind the session (its buffer is full)")

// ErrCloseTimeout is a recording whose final flush took longer than
// Config.CloseTimeout.
var ErrCloseTimeout = errors.New("recording: the sink did not take the end of the recording in time")

type event struct {
	at   time.Duration
	code byte
	data []byte
}

// Session is one session's recording. Its methods never block on the
// sink; they are safe for concurrent use.
type Session struct {
	cfg  *Config
	m    *Metrics
	meta Meta
	w    io.WriteCloser
	t0   time.Time

	mu           sync.Mutex
	queue        []event
	queued       int // bytes of queue's data
	closed       bool
	failed       bool
	err          error
	kept         int64   // stream bytes kept (the size bound)
	tokens       float64 // the rate bound's bucket
	last         time.Time
	rateDropped  int64 // in the current run of drops
	sizeDropped  bool
	bufDropped   int64 // waiting to be marked
	failedCh     chan struct{}
	wake         chan struct{}
	done         chan struct{}
	endRecord    *End
	closeStarted bool
}

func newSession(r *Recorder, m Meta, w io.WriteCloser) *Session {
	s := &Session{
		cfg: &r.cfg, m: r.cfg.Metrics, meta: m, w: w, t0: time.Now(),
		tokens: float64(r.cfg.Burst), failedCh: make(chan struct{}),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	s.last = s.t0
	go s.run()
	return s
}

// Meta returns the session's header.
func (s *Session) Meta() Meta { return s.meta }

// Failed is closed once the recording failed (the sink's write failed, or
// with Required its buffer overflowed); Err then says why.
func (s *Session) Failed() <-chan struct{} { return s.failedCh }

// Err returns why the recording failed, or nil.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Output records p as terminal output (stdout, or a terminal's only
// output).
func (s *Session) Output(p []byte) { s.add(codeOutput, p) }

// Stderr records p as the stderr of a session without a terminal.
func (s *Session) Stderr(p []byte) { s.add(codeStderr, p) }

// Input records p as what the caller sent, if the session records stdin.
func (s *Session) Input(p []byte) {
	if s.meta.Stdin {
		s.add(codeInput, p)
	}
}

// Resize records a terminal size.
func (s *Session) Resize(width, height int) {
	s.add(codeResize, []byte(strconv.Itoa(width)+"x"+strconv.Itoa(height)))
}

func (s *Session) drop(reason string, n int64) {
	if n > 0 {
		s.m.Dropped.WithLabelValues(reason).Add(float64(n))
	}
}

// add applies the bounds to p and queues what is left; s.mu must not be
// held.
func (s *Session) add(code byte, p []byte) {
	if len(p) == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(len(p))
	if s.closed {
		return
	}
	if s.failed {
		s.drop("failed", n)
		return
	}
	at := now.Sub(s.t0)
	// The size bound: keep up to it, then say so once.
	if s.kept >= s.cfg.MaxBytes {
		s.drop("size", n)
		s.markSize(at) // the bound fell at the end of a read
		return
	}
	truncated := false
	if s.kept+n > s.cfg.MaxBytes {
		cut := s.cfg.MaxBytes - s.kept
		s.drop("size", n-cut)
		p, n, truncated = p[:cut], cut, true
	}
	// The rate bound: a token bucket of Burst bytes filled at Rate.
	s.tokens = min(float64(s.cfg.Burst), s.tokens+now.Sub(s.last).Seconds()*float64(s.cfg.Rate))
	s.last = now
	if float64(n) > s.tokens {
		take := max(int64(s.tokens), 0)
		first := s.rateDropped == 0
		s.drop("rate", n-take)
		s.rateDropped += n - take
		if take > 0 {
			s.tokens -= float64(take)
			s.kept += take
			s.enqueue(event{at, code, append([]byte(nil), p[:take]...)})
		}
		if first {
			s.enqueue(event{at, codeMarker, fmt.Appendf(nil, "wsmux: over the recording's rate bound (%d B/s): output left out", s.cfg.Rate)})
		}
		return
	}
	if s.rateDropped > 0 {
		s.enqueue(event{at, codeMarker, fmt.Appendf(nil, "wsmux: %d bytes left out (rate bound)", s.rateDropped)})
		s.rateDropped = 0
	}
	s.tokens -= float64(n)
	s.kept += n
	s.enqueue(event{at, code, append([]byte(nil), p...)})
	if truncated {
		s.markSize(at)
	}
}

// markSize says once that the size bound cut the recording; s.mu is held.
func (s *Session) markSize(at time.Duration) {
	if !s.sizeDropped {
		s.sizeDropped = true
		s.enqueue(event{at, codeMarker, fmt.Appendf(nil, "wsmux: the recording's size bound (%d bytes) reached: the rest of the session is not recorded", s.cfg.MaxBytes)})
	}
}

// enqueue queues e within the buffer bound; s.mu is held.
func (s *Session) enqueue(e event) {
	if s.queued+len(e.data) > s.cfg.Buffer {
		s.drop("buffer", int64(len(e.data)))
		s.bufDropped += int64(len(e.data))
		if s.cfg.Required {
			s.failLocked(ErrBehind, "")
		}
		return
	}
	if s.bufDropped > 0 {
		mark := fmt.Appendf(nil, "wsmux: %d bytes left out (the sink fell behind)", s.bufDropped)
		s.bufDropped = 0
		s.queue = append(s.queue, event{e.at, codeMarker, mark})
		s.queued += len(mark)
	}
	s.queue = append(s.queue, e)
	s.queued += len(e.data)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Session) fail(err error, stage string) {
	s.mu.Lock()
	s.failLocked(err, stage)
	s.mu.Unlock()
}

func (s *Session) failLocked(err error, stage string) {
	if s.failed {
		return
	}
	s.failed, s.err = true, err
	if stage != "" {
		s.m.SinkFailures.WithLabelValues(stage).Inc()
	}
	if s.cfg.Required {
		s.m.Refused.WithLabelValues("write").Inc()
	}
	for _, e := range s.queue {
		s.drop("failed", int64(len(e.data)))
	}
	s.queue, s.queued = nil, 0
	close(s.failedCh)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run writes the queued events to the sink, a batch per write, until the
// session is closed and everything is written, or the sink fails.
func (s *Session) run() {
	defer close(s.done)
	enc := newEncoder(&s.meta)
	var buf []byte
	if !s.meta.TTY || s.meta.Kind == "portforward" {
		// No terminal size to wait for: the header goes out at once.
		buf = enc.header(buf)
	}
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed && !s.failed && len(buf) == 0 {
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		q, closed, failed, end := s.queue, s.closed, s.failed, s.endRecord
		s.queue, s.queued = nil, 0
		s.mu.Unlock()
		if failed {
			return
		}
		for _, e := range q {
			buf = enc.event(buf, e)
		}
		if closed {
			buf = enc.end(buf, end, time.Since(s.t0))
		}
		if len(buf) > 0 {
			if _, err := s.w.Write(buf); err != nil {
				s.fail(fmt.Errorf("recording: sink: %w", err), "write")
				return
			}
			s.m.Bytes.Add(float64(len(buf)))
			buf = buf[:0]
		}
		if closed {
			return
		}
	}
}

// End is how a session ended, for the end of its recording.
type End struct {
	// Exit is an exec's or attach's exit status ("0", the code,
	// "error: ...", "unknown").
	Exit string
	// Ports are a port-forward's target ports, ToPod and FromPod its
	// bytes each way.
	Ports          []string
	ToPod, FromPod int64
}

// Close ends the recording with end and waits (up to CloseTimeout) for
// the sink to take it. It returns the recording's failure, if any.
func (s *Session) Close(end End) error {
	s.mu.Lock()
	if s.closeStarted {
		s.mu.Unlock()
		<-s.done
		return s.Err()
	}
	s.closeStarted = true
	at := time.Since(s.t0)
	if s.rateDropped > 0 {
		s.queue = append(s.queue, event{at, codeMarker, fmt.Appendf(nil, "wsmux: %d bytes left out (rate bound)", s.rateDropped)})
		s.rateDropped = 0
	}
	if s.bufDropped > 0 {
		s.queue = append(s.queue, event{at, codeMarker, fmt.Appendf(nil, "wsmux: %d bytes left out (the sink fell behind)", s.bufDropped)})
	}
	s.endRecord = &end
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(s.cfg.CloseTimeout)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.fail(ErrCloseTimeout, "close")
	}
	if err := s.w.Close(); err != nil && s.Err() == nil {
		s.fail(fmt.Errorf("recording: sink: %w", err), "close")
	}
	<-s.done // a sink's Close ends a Write under way (Sink)
	return s.Err()
}
