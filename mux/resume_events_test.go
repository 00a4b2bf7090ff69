package mux

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestResumeEvents: Config.OnResumeEvent reports every suspension (with
// its error) and every resume, in order, on both ends; Suspended is true
// while a session waits for a connection it cannot get. (The client's
// failed redials are events too: TestResumeEventsRedials.)
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
		if ev.Kind == ResumeLost || ev.Kind == ResumeResumed {
			cliEv <- ev
		}
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

// TestResumeEventsRedials: the client reports each redial that failed
// (ResumeDialFailed) and each refused one (ResumeRefused with the status,
// Unknown and Final), numbered from 1 within the suspension, after the
// suspension's ResumeLost; a final refusal is the last event and ends the
// session.
func TestResumeEventsRedials(t *testing.T) {
	old := newResumeServer(t, &ResumeRegistry{}, nil)
	p := newFaultProxy(t, old.host())
	evs := make(chan ResumeEvent, 64)
	c := dialResume(t, "ws://"+p.addr()+"/", "", func(c *Config) {
		c.ResumeTimeout = time.Hour
		c.OnResumeEvent = func(_ *Session, ev ResumeEvent) { evs <- ev }
	})
	resumeEcho(t, c, "before")
	oldSession := <-old.sessions
	p.setRefuse(true) // redials are reset before any answer
	p.cutAll()
	if ev := <-evs; ev.Kind != ResumeLost || !ev.Suspended || ev.Err == nil || ev.Attempt != 0 {
		t.Fatalf("first event %+v, want ResumeLost with its error", ev)
	}
	for i := 1; i <= 2; i++ {
		ev := <-evs
		if ev.Kind != ResumeDialFailed || ev.Attempt != i || ev.Err == nil || ev.Final() {
			t.Fatalf("event %+v, want ResumeDialFailed, attempt %d, with its error", ev, i)
		}
	}
	// The server restarted meanwhile: the session is unknown there.
	restarted := newResumeServer(t, &ResumeRegistry{}, nil)
	p.setTarget(restarted.host())
	_ = oldSession.Close()
	p.setRefuse(false)
	last := 2
	for ev := range evs {
		if ev.Kind == ResumeDialFailed && ev.Attempt == last+1 {
			last++ // a redial under way while the proxy changed
			continue
		}
		var he *HandshakeError
		if ev.Kind != ResumeRefused || ev.Attempt != last+1 || ev.Status != http.StatusNotFound || !ev.Unknown || !ev.Final() || !errors.As(ev.Err, &he) {
			t.Fatalf("event %+v, want ResumeRefused, attempt %d, 404, unknown, final", ev, last+1)
		}
		break
	}
	<-c.Done()
	if !errors.Is(c.Err(), ErrResumeRefused) {
		t.Fatalf("session ended with %v, want ErrResumeRefused", c.Err())
	}
	select {
	case ev := <-evs:
		t.Fatalf("an event after the final refusal: %+v", ev)
	default:
	}
	if got := ResumeRefused.String() + "," + ResumeDialFailed.String() + "," + ResumeLost.String() + "," + ResumeResumed.String(); got != "refused,dial failed,lost,resumed" {
		t.Fatalf("kind names %q", got)
	}
}
