package mux

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The client's side of resumption: the redials of a suspended session
// (Dialer.Dial sets Session.res.redial), each one reported as a
// ResumeEvent.

// redialLoop redials until the session resumes, the server refuses, or the
// resume timeout passes (the engine then ends the session). It stays in
// charge (busy) until the session runs: a connection that drops again
// while attach starts it finds busy set and starts no loop of its own.
func (s *Session) redialLoop() {
	r := s.res
	backoff := 50 * time.Millisecond
	attempt := 0
	for {
		s.mu.Lock()
		if !s.e.Suspended() {
			r.busy = false
			s.unlock()
			return
		}
		done := s.readerDone
		s.unlock()
		<-done // the old reader is gone: the received count is final
		s.mu.Lock()
		recv := s.e.ReceivedCount()
		tok := r.token
		s.unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ResumeTimeout)
		stop := make(chan struct{})
		go func() { // the session's end stops a dial in progress
			select {
			case <-s.deadCh:
				cancel()
			case <-stop:
			}
		}()
		attempt++
		conn, br, hdr, err := r.redial(ctx, tok, recv)
		close(stop)
		cancel()
		if err == nil {
			peer, perr := strconv.ParseUint(hdr.Get(HeaderResumeReceived), 10, 64)
			if perr != nil {
				_ = conn.Close()
				s.abandon(fmt.Errorf("mux: resume: bad %s in the server's answer", HeaderResumeReceived))
				return
			}
			s.mu.Lock()
			r.token = hdr.Get(HeaderResumeToken)
			s.unlock()
			if err := s.attach(conn, br, peer, attempt); err != nil {
				_ = conn.Close()
			}
			backoff = 50 * time.Millisecond
			attempt = 0
			continue // resumed, or dropped again already
		}
		var he *HandshakeError
		s.mu.Lock()
		if errors.As(err, &he) {
			s.postResumeEvent(ResumeEvent{Kind: ResumeRefused, Attempt: attempt, Status: he.StatusCode,
				Unknown: he.StatusCode == http.StatusNotFound && he.Header.Get(headerResume) == "unknown", Err: err})
		} else if s.e.Err() == nil {
			s.postResumeEvent(ResumeEvent{Kind: ResumeDialFailed, Attempt: attempt, Err: err})
		}
		s.unlock()
		if he != nil && refusalIsFinal(he.StatusCode) {
			s.abandon(fmt.Errorf("%w: %w", ErrResumeRefused, err))
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.deadCh:
			t.Stop()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// abandon ends a suspended session that cannot resume.
func (s *Session) abandon(err error) {
	s.mu.Lock()
	s.e.AbandonResume(err)
	s.res.busy = false
	s.unlock()
}
