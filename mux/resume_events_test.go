package mux

import (
	"context"
	"io"
	"testing"
)

// TestResumeEvents: Config.OnResumeEvent reports every suspension (with
// its error) and every resume, in order, on both ends; Suspended is true
// while a session waits for a connection it cannot get.
func TestResumeEvents(t *testing.T) {
	srvEv := make(chan ResumeEvent, 16)
	rs := newResumeServer(t, &ResumeRegistry{}, func(c *Config) {
		c.OnResumeEvent = func(s *Session, ev ResumeEvent) { srvEv <- ev }
	})
	proxy := newCutProxy(t, rs.host())
	cliEv := make(chan ResumeEvent, 16)
	cfg := DefaultConfig()
	cfg.Resume = true
	var hooked *Session
	cfg.OnResumeEvent = func(s *Session, ev ResumeEvent) {
		hooked = s // read after the events that follow its writes
		cliEv <- ev
	}
	s, echo := dialEcho(t, &Dialer{Config: cfg}, "ws://"+proxy.Addr()+"/")
	expect := func(side string, ch chan ResumeEvent, suspended bool) {
		t.Helper()
		ev := <-ch
		if ev.Suspended != suspended || suspended != (ev.Err != nil) {
			t.Fatalf("%s: event %+v, want suspended=%v (with its error when suspended)", side, ev, suspended)
		}
	}
	echo('a')
	for i := range 2 {
		proxy.Cut()
		echo(byte('b' + i)) // the session resumes to carry it
		expect("client", cliEv, true)
		expect("client", cliEv, false)
		expect("server", srvEv, true)
		expect("server", srvEv, false)
	}
	if hooked != s {
		t.Fatal("the hook got another session")
	}
	if s.Suspended() {
		t.Fatal("Suspended after the resume")
	}
	// No way back: the session stays suspended.
	proxy.StopAccepting()
	proxy.Cut()
	expect("client", cliEv, true)
	if !s.Suspended() {
		t.Fatal("not Suspended while the server cannot be reached")
	}
	_ = s.Close()
	<-s.Done()
	select {
	case ev := <-cliEv:
		t.Fatalf("an event after the suspension: %+v", ev)
	default:
	}
	if cs := s.Stats(); cs.Suspends != 3 || cs.Resumes != 2 {
		t.Fatalf("stats: %d suspensions, %d resumes", cs.Suspends, cs.Resumes)
	}
	ss := <-rs.sessions // suspended too, until its ResumeTimeout: end it
	_ = ss.Close()
	<-ss.Done()
}

// dialEcho dials url with d and opens a stream to a server that echoes
// it; echo(b) writes b and checks that it comes back. t's cleanup closes
// the session.
func dialEcho(t *testing.T, d *Dialer, url string) (*Session, func(b byte)) {
	t.Helper()
	s, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, func(b byte) {
		t.Helper()
		if _, err := st.Write([]byte{b}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got := make([]byte, 1)
		if _, err := io.ReadFull(st, got); err != nil || got[0] != b {
			t.Fatalf("echo of %q: %q, %v", b, got, err)
		}
	}
}
