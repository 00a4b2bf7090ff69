// Package resumedial lets the programs and adapters built on mux see what a
// resumable session's connection goes through (docs/spec/wsmux-resume-v1.md):
// it is the net.Conn dialer of a mux.Dialer, so it is called again for every
// redial of a suspended session, and it reads the status of every upgrade
// answer (a 101 that resumed the session, a 404 of a replica without it...)
// as the bytes go by. Its caller reports them (a log line per drop and per
// resume); mux itself does not log.
//
// To see the HTTP answer of a wss:// upgrade in the clear, the Watcher does
// the TLS handshake itself: the mux.Dialer is given URL(), a ws:// URL with
// the same host, and NetDial, which ignores the address it is asked for and
// dials the original host (TLS included).
//
// It imports only the standard library and must not import mux (mux does
// not know it exists).
package resumedial

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Kind is what happened to a session's connection.
type Kind int

const (
	// Lost: the connection of a session that was connected dropped and a
	// redial began (the session is suspended).
	Lost Kind = iota + 1
	// Resumed: the server accepted the resume (101); the session runs on
	// the new connection.
	Resumed
	// Refused: the server answered a resume with an error status; 429 and
	// 5xx are retried by mux until its resume timeout, 403, 404 and 409
	// end the session at once.
	Refused
	// DialFailed: a redial could not reach the server (mux retries).
	DialFailed
)

func (k Kind) String() string {
	switch k {
	case Lost:
		return "lost"
	case Resumed:
		return "resumed"
	case Refused:
		return "refused"
	case DialFailed:
		return "dial failed"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one step of a session's connection.
type Event struct {
	Kind Kind
	// Attempt counts the redials of the current suspension, from 1 (0 for
	// Lost).
	Attempt int
	// Status is the server's HTTP status (Refused).
	Status int
	// Unknown is set on a Refused whose answer names the session as
	// unknown there (404, header Wsmux-Resume: unknown): the resume landed
	// on a replica without it, or the session expired.
	Unknown bool
	// Err is the dial error (DialFailed).
	Err error
}

// Final reports whether a Refused event ends the session (mux does not
// retry it).
func (e Event) Final() bool {
	return e.Kind == Refused && e.Status != http.StatusTooManyRequests && e.Status < 500
}

// Watcher dials a server's connections for one mux session and reports
// the drops and resumes of that session.
type Watcher struct {
	// Dial opens the TCP connection (or a tunnel through a proxy) to addr;
	// nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS configures the handshake of https/wss URLs; nil means defaults.
	TLS *tls.Config
	// DialTLS, when set, replaces Dial and TLS: it opens the connection to
	// the server, TLS included for https/wss (through a proxy, say).
	DialTLS func(ctx context.Context) (net.Conn, error)
	// OnEvent, when set, receives every event, in order, from the
	// goroutine that dials (it must not block for long).
	OnEvent func(Event)

	addr   string // host:port to dial
	host   string // for the TLS server name
	secure bool
	wsURL  string

	mu        sync.Mutex
	dials     int  // connections dialled
	connected bool // the last upgrade succeeded
	attempt   int
	first     http.Header // headers of the first 101
}

// New returns a Watcher for rawURL (http, https, ws or wss).
func New(rawURL string) (*Watcher, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	w := &Watcher{}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
	case "https", "wss":
		w.secure = true
	default:
		return nil, fmt.Errorf("server URL %q: scheme must be http, https, ws or wss", rawURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server URL %q: no host", rawURL)
	}
	port := u.Port()
	if port == "" {
		port = map[bool]string{false: "80", true: "443"}[w.secure]
	}
	w.host = u.Hostname()
	w.addr = net.JoinHostPort(w.host, port)
	u.Scheme = "ws" // the TLS is ours; the Host header stays as given
	w.wsURL = u.String()
	return w, nil
}

// Addr is the host:port the Watcher dials (unless Dial says otherwise).
func (w *Watcher) Addr() string { return w.addr }

// URL is the URL to give the mux.Dialer: ws://, the host as given.
func (w *Watcher) URL() string { return w.wsURL }

// FirstHeader returns the headers of the first successful upgrade answer
// (nil before it).
func (w *Watcher) FirstHeader() http.Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func (w *Watcher) emit(e Event) {
	if w.OnEvent != nil {
		w.OnEvent(e)
	}
}

// NetDial is the mux.Dialer's NetDial: it dials the original host (with
// TLS for https/wss) whatever addr says.
func (w *Watcher) NetDial(ctx context.Context, network, _ string) (net.Conn, error) {
	w.mu.Lock()
	w.dials++
	redial := w.dials > 1
	lost := w.connected
	w.connected = false
	if lost {
		w.attempt = 0
	}
	w.attempt++
	attempt := w.attempt
	w.mu.Unlock()
	if lost {
		w.emit(Event{Kind: Lost})
	}
	var c net.Conn
	var err error
	if w.DialTLS != nil {
		c, err = w.DialTLS(ctx)
	} else {
		c, err = w.dialTLS(ctx, network)
	}
	if err != nil {
		if redial {
			w.emit(Event{Kind: DialFailed, Attempt: attempt, Err: err})
		}
		return nil, err
	}
	return &tap{Conn: c, w: w, redial: redial, attempt: attempt}, nil
}

// dialTLS dials with Dial, then TLS for https/wss.
func (w *Watcher) dialTLS(ctx context.Context, network string) (net.Conn, error) {
	dial := w.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c, err := dial(ctx, network, w.addr)
	if err == nil && w.secure {
		cfg := &tls.Config{}
		if w.TLS != nil {
			cfg = w.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = w.host
		}
		if len(cfg.NextProtos) > 0 {
			cfg.NextProtos = []string{"http/1.1"}
		}
		tc := tls.Client(c, cfg)
		if err = tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
		} else {
			c = tc
		}
	}
	return c, err
}

// answer records the upgrade answer read on a connection.
func (w *Watcher) answer(resp *http.Response, redial bool, attempt int) {
	w.mu.Lock()
	ok := resp.StatusCode == http.StatusSwitchingProtocols
	if ok {
		w.connected = true
		if w.first == nil {
			w.first = resp.Header.Clone()
		}
	}
	w.mu.Unlock()
	if !redial {
		return
	}
	if ok {
		w.emit(Event{Kind: Resumed, Attempt: attempt})
		return
	}
	w.emit(Event{Kind: Refused, Attempt: attempt, Status: resp.StatusCode,
		Unknown: resp.StatusCode == http.StatusNotFound && resp.Header.Get("Wsmux-Resume") == "unknown"})
}

// maxHead bounds what a tap keeps while it waits for the end of the
// answer's header; a longer header is not looked at.
const maxHead = 64 << 10

// tap passes a connection's bytes through and parses the HTTP answer at
// its start. Read runs on one goroutine at a time (the handshake, then
// the session's reader).
type tap struct {
	net.Conn
	w       *Watcher
	redial  bool
	attempt int
	done    bool
	head    []byte
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if t.done || n == 0 {
		return n, err
	}
	t.head = append(t.head, p[:n]...)
	end := bytes.Index(t.head, []byte("\r\n\r\n"))
	switch {
	case end >= 0:
		t.done = true
		resp, perr := http.ReadResponse(bufio.NewReader(bytes.NewReader(t.head[:end+4])), nil)
		if perr == nil {
			t.w.answer(resp, t.redial, t.attempt)
		}
		t.head = nil
	case len(t.head) > maxHead:
		t.done, t.head = true, nil
	}
	return n, err
}

// Log writes e as one line to l, its message prefixed by prefix ("tunnel",
// "exec"...): for the commands, which log what the library only reports.
func (e Event) Log(l *slog.Logger, prefix string) {
	switch e.Kind {
	case Lost:
		l.Warn(prefix + ": connection lost; the session is suspended, resuming")
	case Resumed:
		l.Info(prefix+": session resumed on a new connection; nothing was lost", "attempt", e.Attempt)
	case Refused:
		switch {
		case e.Unknown:
			l.Error(prefix+": resume refused: the server does not hold the session (it restarted, the resume timeout passed, or a load balancer sent the resume to another replica: see docs/gateway.md on affinity)",
				"status", e.Status, "attempt", e.Attempt)
		case e.Final():
			l.Error(prefix+": resume refused; the session is lost", "status", e.Status, "attempt", e.Attempt)
		default:
			l.Warn(prefix+": resume deferred by the server; retrying", "status", e.Status, "attempt", e.Attempt)
		}
	case DialFailed:
		l.Warn(prefix+": cannot reach the server to resume; retrying until the resume timeout", "attempt", e.Attempt, "error", e.Err)
	}
}
