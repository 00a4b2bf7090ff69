package httpstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/wsmux/wsmux/internal/resumedial"
	"github.com/wsmux/wsmux/mux"
)

// ResumeEvent is a step of a resumable connection (RoundTripperConfig.Resume):
// its Kind says whether the connection was lost, the session resumed, a
// resume was refused (Status; Final when the session ends) or a redial
// failed to connect (Err).
type ResumeEvent = resumedial.Event

// ResumeEventKind is the Kind of a ResumeEvent.
type ResumeEventKind = resumedial.Kind

// The kinds of ResumeEvent.
const (
	ResumeLost       = resumedial.Lost
	ResumeResumed    = resumedial.Resumed
	ResumeRefused    = resumedial.Refused
	ResumeDialFailed = resumedial.DialFailed
)

// resumeOptions are a RoundTripper's resumption settings.
type resumeOptions struct {
	on      bool
	timeout time.Duration
	onEvent func(ResumeEvent)
}

// pendingSession is a resumable session dialled by RoundTrip and not yet
// claimed by NewConnection, or the reason its 101 was not valid.
type pendingSession struct {
	c      *connection
	reason string
}

// roundTripResume is RoundTrip for a resumable connection: mux's Dialer
// dials (so that it can redial with the resume token when the connection
// drops) through a resumedial.Watcher, which dials as RoundTrip does
// (proxy, TLS, UpgradeTransport) and reads the 101's headers for client-go
// (X-Stream-Protocol-Version).
func (rt *RoundTripper) roundTripResume(req *http.Request) (*http.Response, error) {
	w, err := resumedial.New(req.URL.String())
	if err != nil {
		return nil, err
	}
	w.OnEvent = rt.resume.onEvent
	w.DialTLS = func(ctx context.Context) (net.Conn, error) {
		r := req.Clone(ctx)
		if rt.upgradeTransport != nil {
			return dialWithTransport(ctx, r.URL, rt.upgradeTransport)
		}
		return rt.dial(r)
	}
	c, cfg := prepareConnection(rt.muxConfig, rt.pingPeriod, nil)
	cfg.Resume = true
	if rt.resume.timeout > 0 {
		cfg.ResumeTimeout = rt.resume.timeout
	}
	// RoundTrip's own copy of the headers: resumes send them again (and
	// the Dialer adds the affinity cookies the upgrade answers set).
	d := mux.Dialer{Config: cfg, Header: req.Header, NetDial: w.NetDial}
	if dl, ok := req.Context().Deadline(); ok {
		d.HandshakeTimeout = time.Until(dl)
	}
	sess, err := d.Dial(req.Context(), w.URL())
	var he *mux.HandshakeError
	switch {
	case errors.As(err, &he) && he.StatusCode == http.StatusSwitchingProtocols:
		rt.setPending(&pendingSession{reason: he.Reason})
		return &http.Response{StatusCode: he.StatusCode, Status: "101 Switching Protocols", Header: he.Header,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody, Request: req}, nil
	case errors.As(err, &he):
		return &http.Response{StatusCode: he.StatusCode, Status: http.StatusText(he.StatusCode), Header: he.Header,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Body: io.NopCloser(bytes.NewReader(he.Body)), ContentLength: int64(len(he.Body)), Request: req}, nil
	case err != nil:
		return nil, err
	}
	c.start(sess)
	rt.setPending(&pendingSession{c: c})
	return &http.Response{StatusCode: http.StatusSwitchingProtocols, Status: "101 Switching Protocols",
		Header: w.FirstHeader(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody, Request: req}, nil
}

// setPending records p as the last RoundTrip's result, closing an earlier
// session never claimed by NewConnection.
func (rt *RoundTripper) setPending(p *pendingSession) {
	rt.mu.Lock()
	old := rt.pending
	rt.pending = p
	if rt.conn != nil {
		rt.conn.Close()
		rt.conn, rt.br, rt.key = nil, nil, ""
	}
	rt.mu.Unlock()
	if old != nil && old.c != nil {
		_ = old.c.Close()
	}
}

// takePending returns and forgets the pending session (nil if none).
func (rt *RoundTripper) takePending() *pendingSession {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	p := rt.pending
	rt.pending = nil
	return p
}
