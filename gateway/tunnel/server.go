package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/origin"
	"github.com/wsmux/wsmux/mux"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Allow lists the HOST:PORT targets that may be dialled (exact match
	// after CanonicalTarget; no wildcards).
	Allow []string
	// Auth authenticates upgrade requests.
	Auth auth.Authenticator
	// Origins decides which web pages may open sessions from a browser:
	// an upgrade with an Origin header that is neither the server's own
	// nor allowed here is refused with 403. nil: the server's own only.
	Origins *origin.Policy
	// DialTimeout bounds each target dial (default 10 s).
	DialTimeout time.Duration
	// Mux configures sessions (its Handler is replaced); nil means
	// defaults with MaxStreams 1000.
	Mux *mux.Config
	// Limits are the per-caller limits (sessions, dials per second, bytes
	// buffered; StreamsPerSession overrides Mux.MaxStreams). Zero: none.
	Limits  ops.Limits
	Logger  *slog.Logger
	Metrics *ops.Metrics
	// Dial, when set, replaces net.Dialer (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ResumeTimeout > 0 offers session resumption
	// (docs/spec/wsmux-resume-v1.md): a session whose connection drops is
	// kept this long for its client to resume it, by the same caller.
	ResumeTimeout time.Duration
	// AffinityCookie, when set, is sent (Set-Cookie) with the 101 of every
	// new session, for a load balancer to route resumes to this replica.
	AffinityCookie *http.Cookie
}

// Server accepts tunnel sessions on DefaultPath.
type Server struct {
	cfg    ServerConfig
	allow  map[string]bool
	log    *slog.Logger
	m      *ops.Metrics
	health ops.Health
	lim    *ops.Limiter
	wg     sync.WaitGroup // splices

	mu   sync.Mutex
	open map[*mux.Session]map[*mux.Stream]struct{} // spliced streams, by session
}

// NewServer validates cfg and returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("tunnel: no authenticator")
	}
	s := &Server{cfg: cfg, allow: map[string]bool{}, log: cfg.Logger, m: cfg.Metrics,
		open: map[*mux.Session]map[*mux.Stream]struct{}{}}
	for _, a := range cfg.Allow {
		t, err := CanonicalTarget(a)
		if err != nil {
			return nil, fmt.Errorf("--allow %q: %w", a, err)
		}
		s.allow[t] = true
	}
	if len(s.allow) == 0 {
		return nil, errors.New("tunnel: empty allow list: nothing could be forwarded")
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.m == nil {
		s.m = ops.NewMetrics()
	}
	if s.cfg.DialTimeout <= 0 {
		s.cfg.DialTimeout = 10 * time.Second
	}
	if s.cfg.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		s.cfg.Dial = d.DialContext
	}
	var mc mux.Config
	if cfg.Mux != nil {
		mc = *cfg.Mux
	}
	s.m.Upgrades.WithLabelValues("wsmux", "tunnel") // at 0 from the start
	s.lim = ops.NewLimiter(cfg.Limits, s.m)
	s.lim.ApplyBuffer(&mc)
	if mc.MaxStreams == 0 {
		mc.MaxStreams = 1000
	}
	if mc.AcceptBacklog == 0 {
		// Opens wait for a handler (a target dial) in this queue; refuse
		// only beyond the stream limit itself.
		mc.AcceptBacklog = mc.MaxStreams
	}
	mc.Handler = func(*mux.Stream) error { return errors.New("no caller") } // set per session
	if mc.Logger == nil {
		mc.Logger = s.log
	}
	if cfg.ResumeTimeout > 0 {
		mc.Resume, mc.ResumeTimeout = true, cfg.ResumeTimeout
		mc.ResumeRegistry = &mux.ResumeRegistry{Identity: func(r *http.Request) string {
			u, err := s.cfg.Auth.Authenticate(r)
			if err != nil {
				return ""
			}
			return "caller:" + u.ID
		}}
	}
	if err := mc.Validate(); err != nil {
		return nil, err
	}
	s.cfg.Mux = &mc
	return s, nil
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *ops.Metrics { return s.m }

// Health returns the /healthz handler (503 once shutting down).
func (s *Server) Health() *ops.Health { return &s.health }

// Handler routes DefaultPath (the tunnel upgrade), /healthz and /metrics.
func (s *Server) Handler() http.Handler {
	h := http.NewServeMux()
	h.Handle(DefaultPath, http.HandlerFunc(s.serveTunnel))
	h.Handle("/healthz", &s.health)
	h.Handle("/metrics", s.m.Handler())
	return h
}

func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request) {
	u, err := s.cfg.Auth.Authenticate(r)
	who := u.ID
	if err != nil {
		ae := auth.AsError(err)
		reason := ae.Reason
		if reason == auth.ReasonAmbiguous {
			s.m.BadRequests.WithLabelValues(reason).Inc()
			s.log.Warn("tunnel: bad request: "+ae.Detail, "remote", r.RemoteAddr)
			auth.Reject(w, err) // 400
			return
		}
		s.m.AuthFailures.WithLabelValues(reason).Inc()
		s.log.Warn("tunnel: rejected unauthenticated request", "remote", r.RemoteAddr, "reason", reason, "error", err)
		auth.Reject(w, err)
		return
	}
	if oe := s.cfg.Origins.Check(r); oe != nil {
		s.m.BadRequests.WithLabelValues("cross_origin").Inc()
		s.log.Warn("tunnel: refused: "+oe.Error(), "remote", r.RemoteAddr, "caller", who)
		http.Error(w, "wsmux: "+oe.Error()+": a web page of another site may not open tunnels here; if that page is yours, start the server with --allowed-origins", http.StatusForbidden)
		return
	}
	if s.cfg.Mux.ResumeRegistry != nil && r.Header.Get(mux.HeaderResumeToken) != "" {
		s.serveResume(w, r, who)
		return
	}
	release, err := s.lim.AcquireSession(who)
	if err != nil {
		var le *ops.LimitError
		if errors.As(err, &le) {
			s.log.Warn("tunnel: refused a session over the caller's limit", "remote", r.RemoteAddr, "caller", who, "limit", le.Limit, "error", err)
			le.Reject(w)
		}
		return
	}
	if s.cfg.AffinityCookie != nil {
		w.Header().Add("Set-Cookie", s.cfg.AffinityCookie.String())
	}
	mc := *s.cfg.Mux
	mc.Handler = func(st *mux.Stream) error { return s.handleStream(st, who) }
	sess, err := mux.Upgrade(w, r, &mc)
	if err != nil {
		release()
		s.m.BadRequests.WithLabelValues("bad_upgrade").Inc()
		s.log.Warn("tunnel: upgrade failed", "remote", r.RemoteAddr, "caller", who, "error", err)
		return
	}
	s.m.Upgrades.WithLabelValues("wsmux", "tunnel").Inc()
	done := s.m.Sessions.Add("wsmux", sess, func() { s.abort(sess) })
	s.log.Info("tunnel: session started", "remote", r.RemoteAddr, "caller", who)
	go func() {
		<-sess.Done()
		release()
		s.lim.SessionEnded(sess.Err())
		s.log.Info("tunnel: session ended", "remote", r.RemoteAddr, "caller", who, "reason", sess.Err())
		done() // after the last log line: a drain waits for this
	}()
}

// serveResume hands a resume request to the session it names (the
// registry answers 403, 404, 409, 429 or 503 when it cannot).
func (s *Server) serveResume(w http.ResponseWriter, r *http.Request, who string) {
	_, err := mux.Upgrade(w, r, s.cfg.Mux)
	var he *mux.HandshakeError
	switch {
	case errors.Is(err, mux.ErrResumed):
		s.m.Resumes.WithLabelValues("resumed").Inc()
		s.log.Info("tunnel: session resumed", "remote", r.RemoteAddr, "caller", who)
	case errors.As(err, &he):
		s.m.Resumes.WithLabelValues(ops.ResumeOutcome(he.StatusCode)).Inc()
		s.log.Warn("tunnel: resume refused", "remote", r.RemoteAddr, "caller", who, "status", he.StatusCode)
	default:
		s.m.Resumes.WithLabelValues("failed").Inc()
		s.log.Warn("tunnel: resume failed", "remote", r.RemoteAddr, "caller", who, "error", err)
	}
}

// handleStream runs for every stream a client opens: it refuses targets off
// the allow list, dials over the caller's rate and targets it cannot
// reach, else accepts and splices.
func (s *Server) handleStream(st *mux.Stream, who string) error {
	if st.Session().NumStreams() >= s.cfg.Mux.MaxStreams {
		s.lim.StreamLimitReached() // further opens wait for a slot
	}
	vals := st.Headers().Values(TargetHeader)
	raw := strings.Join(vals, ", ")
	remote := st.RemoteAddr().String()
	target, err := CanonicalTarget(raw)
	if err == nil && len(vals) != 1 {
		// One target per stream: a second one (a proxy that adds its own,
		// say) would make the stream mean two things.
		err = errors.New("more than one " + TargetHeader + " header")
	}
	if err != nil {
		s.m.TunnelRefused.WithLabelValues("bad_request").Inc()
		s.log.Warn("tunnel: refused stream with a bad target", "remote", remote, "caller", who, "stream", st.ID(), "target", raw, "error", err)
		return &mux.StreamError{Code: CodeBadRequest, Reason: "bad target header"}
	}
	if !s.allow[target] {
		s.m.TunnelRefused.WithLabelValues("not_allowed").Inc()
		s.log.Warn("tunnel: refused target not on the allow list", "remote", remote, "caller", who, "stream", st.ID(), "target", target)
		return &mux.StreamError{Code: CodeNotAllowed, Reason: "target not allowed: " + clip(target, 100)}
	}
	if err := s.lim.AllowDial(who); err != nil {
		s.m.TunnelRefused.WithLabelValues("rate_limited").Inc()
		s.log.Warn("tunnel: refused a dial over the caller's rate", "remote", remote, "caller", who, "stream", st.ID(), "target", target)
		return &mux.StreamError{Code: frame.RefusedStream, Reason: clip(err.Error(), 200)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout)
	defer cancel()
	c, err := s.cfg.Dial(ctx, "tcp", target)
	if err != nil {
		s.m.TunnelRefused.WithLabelValues("dial_failed").Inc()
		s.log.Warn("tunnel: target dial failed", "remote", remote, "caller", who, "stream", st.ID(), "target", target, "error", err)
		return &mux.StreamError{Code: CodeDialFailed, Reason: clip("dial "+target+": "+errText(err), 128)}
	}
	s.log.Debug("tunnel: stream open", "remote", remote, "stream", st.ID(), "target", target)
	s.track(st, true)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.track(st, false)
		toTarget, fromTarget := splice(st, c, true)
		s.m.TunnelBytes.WithLabelValues("to_target").Add(float64(toTarget))
		s.m.TunnelBytes.WithLabelValues("from_target").Add(float64(fromTarget))
		s.log.Debug("tunnel: stream done", "stream", st.ID(), "target", target, "to_target", toTarget, "from_target", fromTarget)
	}()
	return nil
}

// track adds (or removes) a spliced stream.
func (s *Server) track(st *mux.Stream, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := st.Session()
	if add {
		if s.open[sess] == nil {
			s.open[sess] = map[*mux.Stream]struct{}{}
		}
		s.open[sess][st] = struct{}{}
		return
	}
	delete(s.open[sess], st)
	if len(s.open[sess]) == 0 {
		delete(s.open, sess)
	}
}

// abort ends a session that is still running when the shutdown's drain
// ends: its streams are reset with CONNECTION_RESET first, so the client
// resets its local connections instead of ending them as if complete (a
// session closed under a stream reads as EOF on the other side), then the
// session is closed.
func (s *Server) abort(sess *mux.Session) {
	s.mu.Lock()
	var sts []*mux.Stream
	for st := range s.open[sess] {
		sts = append(sts, st)
	}
	s.mu.Unlock()
	for _, st := range sts {
		_ = st.Reset(CodeConnReset)
	}
	_ = sess.Close()
}

// Wait waits for every splice to end (after the sessions ended).
func (s *Server) Wait() { s.wg.Wait() }

func errText(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
