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
	"strings"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
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
	if _, _, err := net.SplitHostPort(local); err != nil {
		return Forward{}, fmt.Errorf("forward %q: %w", s, err)
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
	// DrainTimeout bounds how long Run waits, after its context ended, for
	// open connections to finish (default 10 s).
	DrainTimeout time.Duration
	Logger       *slog.Logger
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

	conns sync.WaitGroup
	cmu   sync.Mutex
	live  map[net.Conn]struct{}
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
	f := &Forwarder{cfg: cfg, url: u, log: cfg.Logger, forwards: forwards, live: map[net.Conn]struct{}{}}
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
			f.log.Info("tunnel: session ended; reconnecting on the next connection", "reason", f.sess.Err())
			f.sess = nil
		default:
			return f.sess, nil
		}
	}
	d := mux.Dialer{Config: f.cfg.Mux, TLSConfig: f.cfg.TLS, Header: http.Header{}}
	if f.cfg.Token != "" {
		d.Header.Set("Authorization", "Bearer "+f.cfg.Token)
	}
	s, err := d.Dial(ctx, f.url)
	if err != nil {
		return nil, err
	}
	f.log.Info("tunnel: connected", "server", f.url)
	f.sess = s
	return s, nil
}

// Listen opens the local listeners.
func (f *Forwarder) Listen() error {
	for _, fw := range f.forwards {
		ln, err := net.Listen("tcp", fw.Local)
		if err != nil {
			f.closeListeners()
			return err
		}
		f.lns = append(f.lns, ln)
		f.log.Info("tunnel: forwarding", "local", ln.Addr().String(), "target", fw.Target)
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
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			f.acceptLoop(ctx, hard, ln, f.forwards[i].Target)
		}()
	}
	<-ctx.Done()
	f.closeListeners()
	accepting.Wait()
	drained := make(chan struct{})
	go func() { f.conns.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(f.cfg.DrainTimeout):
		f.log.Warn("tunnel: drain deadline passed; aborting open connections", "timeout", f.cfg.DrainTimeout)
		abortAll()
		f.cmu.Lock()
		for c := range f.live {
			abort(c)
		}
		f.cmu.Unlock()
		<-drained
	}
	f.mu.Lock()
	s := f.sess
	f.sess = nil
	f.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	return nil
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

// open opens a stream to target, redialling the session if it went away
// meanwhile, and retrying (with a short backoff) opens the server refused
// unprocessed (REFUSED_STREAM: its queue was full).
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
		se := (*mux.StreamError)(nil)
		refused := errors.As(err, &se) && se.Code == frame.RefusedStream
		if refused && se.Reason == "" {
			time.Sleep(backoff)
			backoff *= 2
			continue
		}
		if !refused && !errors.Is(err, mux.ErrGoAway) && !errors.Is(err, mux.ErrSessionClosed) {
			return nil, err
		}
		f.mu.Lock()
		if f.sess == s {
			f.sess = nil
			go s.Close()
		}
		f.mu.Unlock()
	}
	return nil, err
}
