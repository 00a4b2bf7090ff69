package mux

import (
	"errors"
	"net/http"
)

// The one account of a resumable session's connection: every suspension,
// resume, refused resume and failed redial, with its attempt and status,
// goes to Config.OnResumeEvent, in order (postResumeEvent).

// ResumeEventKind is what happened to a resumable session's connection.
type ResumeEventKind uint8

const (
	// ResumeLost: the connection dropped and the session suspended; a
	// client starts redialling.
	ResumeLost ResumeEventKind = iota + 1
	// ResumeResumed: the session runs on a new connection.
	ResumeResumed
	// ResumeRefused (client): the server answered a resume with an error
	// status (Status). 429 and 5xx are retried until
	// Config.ResumeTimeout; any other status ends the session (Final).
	ResumeRefused
	// ResumeDialFailed (client): a redial did not reach the server's
	// answer (Err); it is retried until Config.ResumeTimeout.
	ResumeDialFailed
)

// String returns the kind's name: "lost", "resumed", "refused" or "dial
// failed".
func (k ResumeEventKind) String() string {
	switch k {
	case ResumeLost:
		return "lost"
	case ResumeResumed:
		return "resumed"
	case ResumeRefused:
		return "refused"
	case ResumeDialFailed:
		return "dial failed"
	}
	return "unknown"
}

// ResumeEvent is what Config.OnResumeEvent learns of a resumable
// session's connection.
type ResumeEvent struct {
	Kind ResumeEventKind
	// Suspended is Kind == ResumeLost.
	Suspended bool
	// Attempt counts the redials of the current suspension, from 1
	// (client; 0 for ResumeLost and on the server).
	Attempt int
	// Status is the server's HTTP status (ResumeRefused).
	Status int
	// Unknown is set on a ResumeRefused whose answer says the server does
	// not hold the session (404 with Wsmux-Resume: unknown): it expired
	// or restarted, or the resume reached a replica without it.
	Unknown bool
	// Err says why: the read or write error, a keepalive timeout, or the
	// client resuming on a new connection before the server saw the old
	// one drop (ResumeLost); the *HandshakeError (ResumeRefused); the
	// dial's error (ResumeDialFailed).
	Err error
}

// Final reports whether a ResumeRefused event ends the session (the
// status forbids a retry).
func (e ResumeEvent) Final() bool {
	return e.Kind == ResumeRefused && refusalIsFinal(e.Status)
}

// refusalIsFinal reports whether a resume answered with status ends the
// session rather than being retried.
func refusalIsFinal(status int) bool {
	return status != http.StatusTooManyRequests && status < 500
}

// errReplaced is the suspension of a server session whose client resumed
// it before the server noticed that the old connection had dropped.
var errReplaced = errors.New("mux: the client resumed the session on a new connection")

// postResumeEvent queues ev for Config.OnResumeEvent (s.mu held). One
// goroutine at a time delivers the queue, so events arrive in order and
// none is delivered under the session's lock.
func (s *Session) postResumeEvent(ev ResumeEvent) {
	if s.cfg.OnResumeEvent == nil {
		return
	}
	r := s.res
	r.events = append(r.events, ev)
	if !r.delivering {
		r.delivering = true
		go s.deliverResumeEvents()
	}
}

// deliverResumeEvents calls OnResumeEvent for each queued event and exits
// when the queue is empty.
func (s *Session) deliverResumeEvents() {
	r := s.res
	for {
		s.mu.Lock()
		if len(r.events) == 0 {
			r.delivering = false
			r.events = nil
			s.mu.Unlock()
			return
		}
		ev := r.events[0]
		r.events = r.events[1:]
		s.mu.Unlock()
		s.cfg.OnResumeEvent(s, ev)
	}
}
