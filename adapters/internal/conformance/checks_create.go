package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Checks of opening a stream: CreateStream waits for the server handler
// and carries the headers, a handler's error rejects the stream, replySent
// is closed only after the reply, and stream identifiers are odd for the
// client and even for the server.

const handlerDelay = 300 * time.Millisecond

func slowHandler(e *Env, s k8shttpstream.Stream, _ <-chan struct{}) error {
	time.Sleep(handlerDelay)
	e.Set("handlerReturned", time.Now())
	e.Accepted <- s
	return nil
}

func runCreateStreamWaits(e *Env) error {
	start := time.Now()
	c, err := e.Client.CreateStream(http.Header{"X-A": {"1"}})
	if err != nil {
		return err
	}
	defer c.Reset()
	returned := time.Now()
	hr, _ := e.Get("handlerReturned").(time.Time)
	if hr.IsZero() {
		return errors.New("CreateStream returned before the server handler returned")
	}
	if returned.Before(hr) || returned.Sub(start) < handlerDelay {
		return fmt.Errorf("CreateStream returned after %v, before the %v handler finished", returned.Sub(start), handlerDelay)
	}
	return nil
}

func runHeadersCarried(e *Env) error {
	h := http.Header{}
	h.Set("streamType", "data")
	h.Set("port", "8080")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	c, err := e.Client.CreateStream(h)
	if err != nil {
		return err
	}
	defer c.Reset()
	s, err := e.AcceptOne(5 * time.Second)
	if err != nil {
		return err
	}
	sh := s.Headers()
	if sh.Get("streamType") != "data" || sh.Get("port") != "8080" {
		return fmt.Errorf("server headers %v", sh)
	}
	if m := sh.Values("X-Multi"); len(m) != 2 || m[0] != "a" || m[1] != "b" {
		return fmt.Errorf("multi-valued header: %q", m)
	}
	if c.Headers().Get("streamType") != "data" {
		return fmt.Errorf("client stream Headers() = %v, want the headers it was created with", c.Headers())
	}
	return nil
}

func rejectHandler(e *Env, s k8shttpstream.Stream, _ <-chan struct{}) error {
	if s.Headers().Get("X-Reject") != "" {
		return errors.New("rejected by test handler")
	}
	e.Accepted <- s
	return nil
}

func runHandlerErrorRejects(e *Env) error {
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		s, err := e.Client.CreateStream(http.Header{"X-Reject": {"1"}})
		if err == nil {
			s.Reset()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			return errors.New("CreateStream succeeded although the handler returned an error")
		}
	case <-time.After(5 * time.Second):
		return errors.New("CreateStream did not fail within 5 s of the handler's rejection")
	}
	_ = start
	// The connection is still usable.
	c, _, err := e.Open("after-reject")
	if err != nil {
		return fmt.Errorf("connection unusable after a rejection: %w", err)
	}
	c.Reset()
	return nil
}

func replySentHandler(e *Env, s k8shttpstream.Stream, replySent <-chan struct{}) error {
	select {
	case <-replySent:
		e.Set("closedEarly", true)
	default:
	}
	go func() {
		select {
		case <-replySent:
			e.Set("replySent", time.Now())
		case <-e.Done:
		}
	}()
	e.Accepted <- s
	return nil
}

func runReplySentAfterReply(e *Env) error {
	c, _, err := e.Open("reply")
	if err != nil {
		return err
	}
	defer c.Reset()
	if e.Get("closedEarly") != nil {
		return errors.New("replySent was closed while the handler was still running")
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if e.Get("replySent") != nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("replySent not closed within 5 s of the accepted CreateStream")
}

func runIdentifiers(e *Env) error {
	var last uint32
	for i := 0; i < 5; i++ {
		c, s, err := e.Open(fmt.Sprint("id", i))
		if err != nil {
			return err
		}
		id := c.Identifier()
		if id%2 != 1 {
			return fmt.Errorf("client stream id %d is not odd", id)
		}
		if id <= last {
			return fmt.Errorf("client stream ids not increasing: %d after %d", id, last)
		}
		if s.Identifier() != id {
			return fmt.Errorf("server sees id %d for client stream %d", s.Identifier(), id)
		}
		last = id
		c.Reset()
	}
	// Server-initiated streams get even ids.
	ss, err := e.Server.CreateStream(http.Header{"X-From": {"server"}})
	if err != nil {
		return fmt.Errorf("server CreateStream: %w", err)
	}
	defer ss.Reset()
	if ss.Identifier() == 0 || ss.Identifier()%2 != 0 {
		return fmt.Errorf("server stream id %d is not even", ss.Identifier())
	}
	return nil
}
