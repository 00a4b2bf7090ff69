package mux

import "errors"

// ResumeEvent is what Config.OnResumeEvent learns of a resumable
// session's connection.
type ResumeEvent struct {
	// Suspended: the connection dropped and the session suspended; Err
	// says why (the read or write error, a keepalive timeout, or the
	// client resuming on a new connection before the server saw the old
	// one drop). Otherwise the session resumed on a new connection.
	Suspended bool
	Err       error
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
