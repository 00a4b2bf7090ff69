package httpstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wsmux/wsmux/mux"
)

// ResumeEvent is a step of a resumable connection (RoundTripperConfig.Resume):
// its Kind says whether the connection was lost, the session resumed, a
// resume was refused (Status; Final when the session ends) or a redial
// failed to connect (Err). It is mux's own account (mux.ResumeEvent).
type ResumeEvent = mux.ResumeEvent

// ResumeEventKind is the Kind of a ResumeEvent.
type ResumeEventKind = mux.ResumeEventKind

// The kinds of ResumeEvent.
const (
	ResumeLost       = mux.ResumeLost
	ResumeResumed    = mux.ResumeResumed
	ResumeRefused    = mux.ResumeRefused
	ResumeDialFailed = mux.ResumeDialFailed
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
// drops) over connections opened as RoundTrip opens them (proxy, TLS,
// UpgradeTransport: the Dialer is given a ws:// URL and does no TLS of its
// own), and mux reports every drop, resume, refusal and failed redial
// (Config.OnResumeEvent). The 101's headers go to client-go
// (X-Stream-Protocol-Version).
func (rt *RoundTripper) roundTripResume(req *http.Request) (*http.Response, error) {
	wsURL, err := plainWebSocketURL(req.URL)
	if err != nil {
		return nil, err
	}
	netDial := func(ctx context.Context, _, _ string) (net.Conn, error) {
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
	if on := rt.resume.onEvent; on != nil {
		cfg.OnResumeEvent = func(_ *mux.Session, e mux.ResumeEvent) { on(e) }
	}
	// RoundTrip's own copy of the headers: resumes send them again (and
	// the Dialer adds the affinity cookies the upgrade answers set).
	d := mux.Dialer{Config: cfg, Header: req.Header, NetDial: netDial}
	if dl, ok := req.Context().Deadline(); ok {
		d.HandshakeTimeout = time.Until(dl)
	}
	sess, err := d.Dial(req.Context(), wsURL)
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
		Header: sess.UpgradeHeader(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody, Request: req}, nil
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

// plainWebSocketURL returns u as a ws:// URL with the host as given, for a
// mux.Dialer whose NetDial opens the connection (TLS included).
func plainWebSocketURL(u *url.URL) (string, error) {
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ws", "wss":
	default:
		return "", fmt.Errorf("server URL %q: scheme must be http, https, ws or wss", u.Redacted())
	}
	if u.Host == "" {
		return "", fmt.Errorf("server URL %q: no host", u.Redacted())
	}
	w := *u
	w.Scheme = "ws"
	return w.String(), nil
}
