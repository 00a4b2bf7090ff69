package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// Forward is one LOCAL:HOST:PORT argument: connections accepted on Local
// are tunnelled to Target.
type Forward struct {
	Local  string // listen address, host:port
	Target string // HOST:PORT the server dials
}

// ParseForward parses "[BIND:]LPORT:HOST:PORT" (BIND defaults to
// 127.0.0.1; IPv6 addresses in brackets).
func ParseForward(s string) (Forward, error) {
	parts, err := splitColons(s)
	if err != nil {
		return Forward{}, fmt.Errorf("forward %q: %w", s, err)
	}
	var local string
	switch len(parts) {
	case 3:
		local = net.JoinHostPort("127.0.0.1", parts[0])
	case 4:
		local = net.JoinHostPort(strings.Trim(parts[0], "[]"), parts[1])
	default:
		return Forward{}, fmt.Errorf("forward %q: want [BIND:]LOCALPORT:HOST:PORT", s)
	}
	target, err := CanonicalTarget(net.JoinHostPort(strings.Trim(parts[len(parts)-2], "[]"), parts[len(parts)-1]))
	if err != nil {
		return Forward{}, fmt.Errorf("forward %q: %w", s, err)
	}
	_, lport, err := net.SplitHostPort(local)
	if err != nil {
		return Forward{}, fmt.Errorf("forward %q: %w", s, err)
	}
	if n, err := strconv.Atoi(lport); err != nil || n < 0 || n > 65535 {
		return Forward{}, fmt.Errorf("forward %q: local port %q: want a number from 0 to 65535 (0 picks a free port)", s, lport)
	}
	return Forward{Local: local, Target: target}, nil
}

// splitColons splits on colons outside brackets.
func splitColons(s string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ':':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
		if depth < 0 || depth > 1 {
			return nil, errors.New("unbalanced brackets")
		}
	}
	parts = append(parts, s[start:])
	for _, p := range parts {
		if p == "" {
			return nil, errors.New("empty field")
		}
	}
	return parts, nil
}

// ClientConfig configures a Forwarder.
type ClientConfig struct {
	// Server is the tunnel server's URL (http, https, ws or wss); an empty
	// path means DefaultPath.
	Server string
	// Token is sent as "Authorization: Bearer <token>".
	Token string
	// TLS configures https/wss (CA, client certificate).
	TLS *tls.Config
	// Mux configures the session; nil means defaults.
	Mux *mux.Config
	// DialTimeout bounds connecting to the server: TCP, TLS and the
	// WebSocket upgrade (default 10 s).
	DialTimeout time.Duration
	// DrainTimeout bounds how long Run waits, after its context ended, for
	// open connections to finish (default 10 s).
	DrainTimeout time.Duration
	// ResumeTimeout > 0 offers session resumption: when the connection
	// drops, a server that supports it keeps the session while the
	// Forwarder redials for this long, and the tunnelled connections go on
	// with nothing lost (a log line on each drop and resume). 0: off.
	ResumeTimeout time.Duration
	// Abort, when closed during that drain (a second SIGINT or SIGTERM),
	// makes Run abort the open connections at once.
	Abort  <-chan struct{}
	Logger *slog.Logger
}

// AbortedError is Run's result when it had to abort open connections:
// the drain deadline passed or Abort was closed.
type AbortedError struct {
	Conns  int    // connections aborted
	Reason string // "drain deadline passed" or "second signal"
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("aborted %d open connection(s): %s", e.Conns, e.Reason)
}

// Forwarder listens locally and tunnels every accepted connection over one
// session, redialled when it ends.
type Forwarder struct {
	cfg      ClientConfig
	url      string
	log      *slog.Logger
	forwards []Forward
	lns      []net.Listener

	mu   sync.Mutex
	sess *mux.Session
	// retired are sessions the server sent GOAWAY on: their streams run to
	// their end (no new ones), then the session closes itself.
	retired map[*mux.Session]struct{}

	conns    sync.WaitGroup
	watching sync.WaitGroup // the sessions' watch goroutines
	cmu      sync.Mutex
	live     map[net.Conn]struct{}
}

// WebSocketURL turns an http(s)/ws(s) server URL into the ws(s) URL of
// path (used when the URL's path is empty).
func WebSocketURL(server, path string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q: scheme must be http, https, ws or wss", server)
	}
	if u.Host == "" {
		return "", fmt.Errorf("server URL %q: no host", server)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	return u.String(), nil
}

// NewForwarder validates cfg.
func NewForwarder(cfg ClientConfig, forwards []Forward) (*Forwarder, error) {
	u, err := WebSocketURL(cfg.Server, DefaultPath)
	if err != nil {
		return nil, err
	}
	if len(forwards) == 0 {
		return nil, errors.New("no LOCAL:HOST:PORT to forward")
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	f := &Forwarder{cfg: cfg, url: u, log: cfg.Logger, forwards: forwards, live: map[net.Conn]struct{}{},
		retired: map[*mux.Session]struct{}{}}
	if f.log == nil {
		f.log = slog.Default()
	}
	return f, nil
}

// Connect dials the session now (so a bad URL or token fails before any
// local connection arrives). A refused handshake returns a
// *mux.HandshakeError with the server's status (401 for bad credentials).
func (f *Forwarder) Connect(ctx context.Context) error {
	_, err := f.session(ctx)
	return err
}

func (f *Forwarder) session(ctx context.Context) (*mux.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sess != nil {
		select {
		case <-f.sess.CloseChan():
			f.sess = nil // logged by its watcher; reconnect below
		default:
			return f.sess, nil
		}
	}
	d := mux.Dialer{Config: f.cfg.Mux, TLSConfig: f.cfg.TLS, Header: http.Header{}, HandshakeTimeout: f.cfg.DialTimeout}
	if f.cfg.Token != "" {
		d.Header.Set("Authorization", "Bearer "+f.cfg.Token)
	}
	if f.cfg.ResumeTimeout > 0 {
		var mc mux.Config
		if f.cfg.Mux != nil {
			mc = *f.cfg.Mux
		}
		mc.Resume, mc.ResumeTimeout = true, f.cfg.ResumeTimeout
		mc.OnResumeEvent = func(_ *mux.Session, e mux.ResumeEvent) { ops.LogResumeEvent(f.log, "tunnel", e) }
		d.Config = &mc
	}
	dctx, cancel := context.WithTimeout(ctx, f.cfg.DialTimeout)
	defer cancel()
	s, err := d.Dial(dctx, f.url)
	if err != nil {
		return nil, err
	}
	f.log.Info("tunnel: connected", "server", f.url)
	f.sess = s
	f.watching.Add(1)
	go f.watch(s)
	return s, nil
}

// watch logs how a session ended and forgets it.
func (f *Forwarder) watch(s *mux.Session) {
	defer f.watching.Done()
	select {
	case <-s.GoAwayReceived():
		f.retire(s) // logs it; the running connections go on
		<-s.CloseChan()
	case <-s.CloseChan():
	}
	err := s.Err()
	var se *mux.SessionError
	switch {
	case errors.As(err, &se) && se.Remote && se.Code == frame.NoError:
		f.log.Info("tunnel: session ended: the server closed it (GOAWAY NO_ERROR); a new connection opens a new session", "reason", err)
	case errors.Is(err, mux.ErrSessionClosed) && errors.As(err, &se) && !se.Remote && se.Code == frame.NoError:
		f.log.Debug("tunnel: session closed", "reason", err)
	default:
		f.log.Warn("tunnel: session lost; a new connection opens a new session", "reason", err)
	}
	f.mu.Lock()
	delete(f.retired, s)
	if f.sess == s {
		f.sess = nil
	}
	f.mu.Unlock()
}

// retire stops opening streams on s, whose server sent GOAWAY: the streams
// it carries go on to their end (the session then closes itself, or Run
// closes it); the next connection dials a new session.
func (f *Forwarder) retire(s *mux.Session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sess != s {
		return
	}
	f.sess = nil
	select {
	case <-s.CloseChan():
		return
	default:
	}
	f.retired[s] = struct{}{}
	f.log.Info("tunnel: the server sent GOAWAY: running connections finish on their session, new ones need a new session",
		"open_streams", s.NumStreams())
}

// Listen opens the local listeners. An error names the address and says
// what to do.
func (f *Forwarder) Listen() error {
	for _, fw := range f.forwards {
		ln, err := net.Listen("tcp", fw.Local)
		if err != nil {
			f.closeListeners()
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("cannot listen on %s: the port is in use: pick another LOCALPORT (0 picks a free one)", fw.Local)
			}
			return fmt.Errorf("cannot listen on %s: %w", fw.Local, err)
		}
		f.lns = append(f.lns, ln)
	}
	return nil
}

// Addrs returns the listeners' addresses (after Listen).
func (f *Forwarder) Addrs() []net.Addr {
	var out []net.Addr
	for _, ln := range f.lns {
		out = append(out, ln.Addr())
	}
	return out
}

// Close closes the listeners and the session of a Forwarder that will not
// Run (Run closes them itself).
func (f *Forwarder) Close() {
	f.closeListeners()
	f.mu.Lock()
	s := f.sess
	f.sess = nil
	f.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	f.watching.Wait() // the session's end is logged before Close returns
}

func (f *Forwarder) closeListeners() {
	for _, ln := range f.lns {
		_ = ln.Close()
	}
}

// Run accepts and tunnels connections until ctx ends; then it stops
// accepting, gives open connections DrainTimeout to finish, aborts the
// rest and closes the session.
func (f *Forwarder) Run(ctx context.Context) error {
	if f.lns == nil {
		if err := f.Listen(); err != nil {
			return err
		}
	}
	// Connections outlive ctx (they drain); hard ends at the drain deadline.
	hard, abortAll := context.WithCancel(context.WithoutCancel(ctx))
	defer abortAll()
	var accepting sync.WaitGroup
	for i, ln := range f.lns {
		f.log.Info("tunnel: forwarding", "local", ln.Addr().String(), "target", f.forwards[i].Target)
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			f.acceptLoop(ctx, hard, ln, f.forwards[i].Target)
		}()
	}
	<-ctx.Done()
	f.closeListeners()
	accepting.Wait()
	f.cmu.Lock()
	open := len(f.live)
	f.cmu.Unlock()
	f.log.Info("tunnel: stopping: no new connections", "open_connections", open, "drain_timeout", f.cfg.DrainTimeout,
		"hint", "signal again to abort them now")
	drained := make(chan struct{})
	go func() { f.conns.Wait(); close(drained) }()
	var aborted error
	timer := time.NewTimer(f.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		aborted = f.abortOpen(abortAll, drained, "drain deadline passed")
	case <-f.cfg.Abort:
		aborted = f.abortOpen(abortAll, drained, "second signal")
	}
	f.mu.Lock()
	sessions := make([]*mux.Session, 0, len(f.retired)+1)
	if f.sess != nil {
		sessions = append(sessions, f.sess)
	}
	for s := range f.retired {
		sessions = append(sessions, s)
	}
	f.sess, f.retired = nil, map[*mux.Session]struct{}{}
	f.mu.Unlock()
	for _, s := range sessions {
		_ = s.Close()
	}
	f.watching.Wait() // every session's end is logged before Run returns
	return aborted
}

// abortOpen aborts every open connection, waits for their handlers and
// returns the *AbortedError to report (nil if none was left).
func (f *Forwarder) abortOpen(abortAll func(), drained <-chan struct{}, reason string) error {
	abortAll()
	f.cmu.Lock()
	n := len(f.live)
	for c := range f.live {
		abort(c)
	}
	f.cmu.Unlock()
	<-drained
	if n == 0 {
		return nil
	}
	f.log.Warn("tunnel: aborted open connections", "connections", n, "reason", reason)
	return &AbortedError{Conns: n, Reason: reason}
}

func (f *Forwarder) acceptLoop(ctx, hard context.Context, ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				f.log.Error("tunnel: accept failed", "local", ln.Addr().String(), "error", err)
			}
			return
		}
		f.conns.Add(1)
		f.cmu.Lock()
		f.live[c] = struct{}{}
		f.cmu.Unlock()
		go func() {
			defer f.conns.Done()
			f.handle(hard, c, target)
			f.cmu.Lock()
			delete(f.live, c)
			f.cmu.Unlock()
		}()
	}
}

func (f *Forwarder) handle(ctx context.Context, c net.Conn, target string) {
	st, err := f.open(ctx, target)
	if err != nil {
		var se *mux.StreamError
		if errors.As(err, &se) {
			f.log.Error("tunnel: server refused the connection", "local", c.LocalAddr().String(), "target", target,
				"code", CodeName(se.Code), "reason", se.Reason)
		} else {
			f.log.Error("tunnel: cannot open a stream", "target", target, "error", err)
		}
		abort(c)
		return
	}
	splice(st, c, false)
}

// open opens a stream to target. When the server sent GOAWAY (Open fails
// with mux.ErrGoAway, or the stream is refused because of it) the session
// is retired, not closed: the connections it carries run to their end, and
// the open is retried on a new session. Opens the server refused
// unprocessed (REFUSED_STREAM without a reason: its queue was full) are
// retried with a short backoff.
func (f *Forwarder) open(ctx context.Context, target string) (*mux.Stream, error) {
	h := http.Header{TargetHeader: {target}}
	var err error
	backoff := 10 * time.Millisecond
	for range 8 {
		var s *mux.Session
		if s, err = f.session(ctx); err != nil {
			return nil, err
		}
		var st *mux.Stream
		if st, err = s.Open(ctx, h); err == nil {
			return st, nil
		}
		var se *mux.StreamError
		refused := errors.As(err, &se) && se.Code == frame.RefusedStream
		switch {
		case errors.Is(err, mux.ErrGoAway), refused && se.Reason == "GOAWAY":
			f.retire(s)
		case errors.Is(err, mux.ErrSessionClosed):
			// Gone: session() notices and redials.
		case refused && se.Reason == "":
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			backoff *= 2
		default:
			return nil, err
		}
	}
	return nil, err
}
