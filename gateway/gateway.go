// Package gateway is the server behind `wsmux gateway`, for embedding in
// a program's own http.Server (Example): it accepts wsmux, Kubernetes'
// WebSocket and legacy SPDY requests for the exec, attach and port-forward
// subresources (unmodified kubectl included), authenticates the caller
// (Config.Auth: an auth.Authenticator, the package's tokens, client
// certificates and TokenReview, or the program's own), checks the policy and
// per-caller limits, and forwards the session to the cluster with the
// gateway's own credentials (Config.Cluster, a client-go rest.Config),
// acting as the caller (Config.Impersonate). Callers never see the cluster's
// credentials, and the cluster never sees the callers'.
//
// A caller is a controller.User and a request's pod a controller.Target,
// parsed by controller.ParsePodPath: the types the tickets (package
// gateway/ticket) and the socket handoff (gateway/handoff) share with
// controllers. Those two, the TCP tunnel (gateway/tunnel), the web terminal
// (gateway/webui), the listeners' limits and metrics (gateway/ops), session
// recording (gateway/recording) and the state the replicas of a fleet share
// (gateway/sharedstate, Config.Fleet) are packages of their own; cmd/wsmux
// wires them to flags.
//
// It imports mux, the adapters, client-go and the apiserver's proxy package; it
// must not import testing or the test helpers (internal/testnet, clustertest),
// nor the handoff and ticket packages, which get its ServeAs handed in.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"k8s.io/apiserver/pkg/util/proxy"

	"github.com/wsmux/wsmux/adapters/bridge"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/origin"
	"github.com/wsmux/wsmux/gateway/recording"
	"github.com/wsmux/wsmux/mux"
)

// Upstream protocols.
const (
	UpstreamSPDY  = "spdy"
	UpstreamWsmux = "wsmux"
)

// Config configures a Gateway.
type Config struct {
	// Auth authenticates callers (tokens and/or client certificates).
	Auth auth.Authenticator
	// Origins decides which web pages may use the gateway from a browser:
	// a request with an Origin header that is neither the gateway's own
	// (the scheme and Host it came to) nor allowed here is refused with
	// 403, whatever its credentials. nil: the gateway's own origin only.
	Origins *origin.Policy
	// Impersonate makes every upstream request act as the caller
	// (Impersonate-User, -Uid, -Group headers with the caller's user from
	// the token file or client certificate), so that the cluster's RBAC
	// decides what each caller may do; callers without a user name are
	// refused (403). The gateway's own identity needs the "impersonate"
	// verb on users, groups and uids. Off: every caller acts as the
	// gateway's identity.
	Impersonate bool
	// Policy, when set and holding a policy, is checked for every
	// streaming request before anything is opened upstream (403 if it
	// allows no such request).
	Policy *PolicyStore
	// Cluster is the upstream: the apiserver (or a kubelet) and the
	// credentials to reach it, typically from a kubeconfig.
	Cluster *rest.Config
	// Upstream is the protocol spoken to the cluster: "spdy" (default;
	// every Kubernetes) or "wsmux" (an upstream that speaks wsmux).
	Upstream string
	// Limits are the per-caller limits: sessions (429 beyond), upstream
	// dials per second (429 beyond), streams per wsmux session and the
	// bytes a caller's wsmux sessions may buffer. Zero: none.
	Limits ops.Limits
	// DrainTimeout bounds a wsmux session's GOAWAY drain (mux's
	// CloseTimeout; 0 keeps its default): more than the shutdown timeout,
	// so that the shutdown ends drains and reports what it aborted.
	DrainTimeout time.Duration
	// ResumeTimeout > 0 offers session resumption to wsmux clients
	// (docs/spec/wsmux-resume-v1.md): when a client's connection drops,
	// its downstream session is suspended for up to this long, the
	// upstream connection is kept, and the client's resume (same caller)
	// lands on the same session. A resume this gateway does not hold (a
	// restart, another replica outside a Fleet) is refused at once with
	// 404 and "Wsmux-Resume: unknown"; in a Fleet it is forwarded to the
	// replica that holds it. 0: off.
	ResumeTimeout time.Duration
	// AffinityCookie, when set, is sent (Set-Cookie) with the 101 of every
	// new wsmux session: resumable clients send it back with their
	// resumes, so a load balancer can route them to this replica
	// (docs/load-balancers.md).
	AffinityCookie *http.Cookie
	Logger         *slog.Logger
	Metrics        *ops.Metrics

	// Fleet, when set, makes the gateway one replica of a fleet sharing
	// tickets, limits and resumable sessions (fleet.go, FleetConfig); nil:
	// a single replica with its own memory. Call Close when done.
	Fleet *FleetConfig

	// Recording, when set, records the sessions its policy names
	// (docs/gateway.md, "Session recording") and serves their replay to
	// its auditors at RecordingsAPI (the page is /ui/recordings/).
	Recording *recording.Recorder
}

// Gateway is the gateway's HTTP handler.
type Gateway struct {
	cfg    Config
	base   *url.URL
	log    *slog.Logger
	m      *ops.Metrics
	health ops.Health
	lim    *ops.Limiter
	muxCfg *mux.Config  // downstream wsmux sessions
	proxy  http.Handler // everything but the streaming subresources
	review *http.Client // preflight's access reviews

	fleet     *fleet // nil: a single replica
	closeOnce sync.Once
}

// New validates cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Auth == nil {
		return nil, errors.New("gateway: no authenticator")
	}
	if cfg.Cluster == nil || cfg.Cluster.Host == "" {
		return nil, errors.New("gateway: no cluster configuration (host)")
	}
	switch cfg.Upstream {
	case "":
		cfg.Upstream = UpstreamSPDY
	case UpstreamSPDY, UpstreamWsmux:
	default:
		return nil, fmt.Errorf("gateway: upstream %q: want spdy or wsmux", cfg.Upstream)
	}
	base, err := url.Parse(cfg.Cluster.Host)
	if err != nil {
		return nil, fmt.Errorf("gateway: cluster host: %w", err)
	}
	if base.Scheme == "" || base.Host == "" {
		// rest.Config accepts "host:port"; kubeconfigs normally carry a URL.
		if base, err = url.Parse("https://" + cfg.Cluster.Host); err != nil {
			return nil, err
		}
	}
	g := &Gateway{cfg: cfg, base: base, log: cfg.Logger, m: cfg.Metrics}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.m == nil {
		g.m = ops.NewMetrics()
	}
	for _, proto := range []string{"wsmux", "spdy", ProtoWebSocket} { // at 0 from the start
		for _, kind := range []string{"exec", "attach", "portforward"} {
			g.m.Upgrades.WithLabelValues(proto, kind)
		}
	}
	g.lim = ops.NewLimiter(cfg.Limits, g.m)
	g.muxCfg = &mux.Config{CloseTimeout: cfg.DrainTimeout}
	g.lim.ApplyBuffer(g.muxCfg)
	if cfg.ResumeTimeout > 0 {
		g.muxCfg.Resume, g.muxCfg.ResumeTimeout = true, cfg.ResumeTimeout
		// A token is bound to the caller of the upgrade that received it
		// (serveStreaming stores it in the request's context).
		g.muxCfg.ResumeRegistry = &mux.ResumeRegistry{Identity: func(r *http.Request) string {
			u := callerOf(r)
			return u.ID + "\x00" + u.Name
		}}
	}
	if g.muxCfg.MaxStreams == 0 {
		g.muxCfg.MaxStreams = mux.DefaultConfig().MaxStreams
	}
	if err := g.muxCfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: limits: %w", err)
	}
	clusterRT, err := rest.TransportFor(cfg.Cluster) // the gateway's own credentials
	if err != nil {
		return nil, fmt.Errorf("gateway: cluster transport: %w", err)
	}
	g.proxy = g.newProxy(clusterRT)
	g.review = &http.Client{Transport: clusterRT} // preflight bounds each review
	if cfg.Fleet != nil {
		if g.fleet, err = newFleet(g, *cfg.Fleet); err != nil {
			return nil, err
		}
		if g.muxCfg.ResumeRegistry != nil {
			g.muxCfg.ResumeRegistry.OnToken = g.fleet.onToken
		}
		g.fleet.start()
	}
	return g, nil
}

// Metrics returns the gateway's metrics.
func (g *Gateway) Metrics() *ops.Metrics { return g.m }

// Health returns the /healthz handler.
func (g *Gateway) Health() *ops.Health { return &g.health }

// Handler routes /healthz, /metrics and every other path to the streaming
// proxy.
func (g *Gateway) Handler() http.Handler {
	h := http.NewServeMux()
	h.Handle("/healthz", &g.health)
	h.Handle("/metrics", g.m.Handler())
	if g.cfg.Recording != nil {
		h.Handle(RecordingsAPI, g.recordingsAPI())
	}
	h.Handle("/", http.HandlerFunc(g.serveStreaming))
	return h
}

func isSPDYUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		if strings.Contains(strings.ToLower(v), "spdy/3.1") {
			return true
		}
	}
	return false
}

func (g *Gateway) serveStreaming(w http.ResponseWriter, r *http.Request) {
	user, err := g.identify(r)
	who := user.ID
	if err != nil {
		ae := auth.AsError(err)
		reason := ae.Reason
		if reason == auth.ReasonAmbiguous {
			g.badRequest(w, r, reason, ae.Detail)
			return
		}
		g.m.AuthFailures.WithLabelValues(reason).Inc()
		g.log.Warn("gateway: rejected unauthenticated request", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", reason, "error", err)
		auth.Reject(w, err)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
	if oe := g.cfg.Origins.Check(r); oe != nil {
		// A browser attaches a client certificate (or a cookie a proxy in
		// front reads) to a page's requests on its own: cross-site
		// WebSocket hijacking unless the page's origin is checked.
		g.crossOrigin(w, r, oe)
		return
	}
	if g.cfg.Impersonate && user.Name == "" {
		g.forbidden(w, r, user, "this credential has no user to act as: give the token a user in the token file (TOKEN,USER[,UID[,\"GROUPS\"]])")
		return
	}
	t, ok := controller.ParsePodPath(r.URL.Path)
	if !ok {
		if k8shttpstream.IsUpgradeRequest(r) {
			g.badRequest(w, r, "bad_path", "path must be /api/v1/namespaces/{namespace}/pods/{pod}/exec, /attach or /portforward")
			return
		}
		// GET of the pod, discovery...: proxied to the cluster as the caller.
		g.proxy.ServeHTTP(w, r)
		return
	}
	if g.cfg.Policy != nil {
		if p := g.cfg.Policy.Get(); p != nil {
			if ok, why := p.Allows(user, t, r.URL.Query().Get("container")); !ok {
				g.forbidden(w, r, user, why)
				return
			}
		}
	}
	if g.muxCfg.ResumeRegistry != nil && r.Header.Get(mux.HeaderResumeToken) != "" && wsmuxhttpstream.IsWsmuxRequest(r) {
		g.serveResume(w, r, user, t)
		return
	}
	var up k8shttpstream.ResponseUpgrader
	var proto string
	switch {
	case wsmuxhttpstream.IsWsmuxRequest(r):
		up, proto = wsmuxhttpstream.NewResponseUpgraderWithConfig(g.muxCfg), "wsmux"
	case k8shttpstream.IsUpgradeRequest(r) && isSPDYUpgrade(r):
		up, proto = spdy.NewResponseUpgrader(), "spdy"
	case t.Subresource == "portforward" && isTunnelRequest(r):
		proto = ProtoWebSocket
	case t.Subresource != "portforward" && isChannelRequest(r):
		proto = ProtoWebSocket
	default:
		g.badRequest(w, r, "not_upgrade", "expected a WebSocket upgrade (subprotocol "+mux.Subprotocol+
			", v5.channel.k8s.io or v4.channel.k8s.io for exec/attach, SPDY/3.1+portforward.k8s.io for portforward) or a SPDY/3.1 upgrade request;"+
			" if a SPDY client sent it, a proxy on the way dropped its Upgrade header: use WebSocket (kubectl 1.31 or later does by default)",
			"upgrade", r.Header.Get("Upgrade"), "subprotocols", r.Header.Values("Sec-Websocket-Protocol"))
		return
	}
	if up != nil && len(r.Header.Values(k8shttpstream.HeaderProtocolVersion)) == 0 {
		g.badRequest(w, r, "no_protocol", "missing "+k8shttpstream.HeaderProtocolVersion+" header")
		return
	}
	if proto != "spdy" {
		// Checked before anything is opened upstream (the bridge dials
		// first); Kubernetes' WebSocket servers would also refuse it on
		// the hijacked connection, where the gateway cannot see it.
		if why := badHandshake(r); why != "" {
			g.badRequest(w, r, "bad_upgrade", "invalid WebSocket handshake: "+why)
			return
		}
	}
	if up == nil {
		// A translated WebSocket is accepted before the cluster is asked:
		// preflight.go.
		if msg := g.preflight(r.Context(), user, t); msg != "" {
			g.m.BadRequests.WithLabelValues("cluster_forbidden").Inc()
			g.log.Warn("gateway: the cluster's authorizer refuses this upgrade: answered 403 before upgrading", "remote", r.RemoteAddr,
				"caller", who, "user", user.Name, "path", r.URL.Path)
			writeStatus(w, http.StatusForbidden, "Forbidden", msg)
			return
		}
	}
	log := g.log.With("remote", r.RemoteAddr, "caller", who, "user", user.Name, "namespace", t.Namespace, "pod", t.Pod,
		"subresource", t.Subresource, "protocol", proto)
	release, err := g.acquireSession(r.Context(), who) // across the fleet with Config.Fleet
	if err == nil {
		defer release()
		err = g.allowDial(r.Context(), who) // one upstream dial per session
	}
	if err != nil {
		var le *ops.LimitError
		if errors.As(err, &le) {
			log.Warn("gateway: refused a session over the caller's limit", "limit", le.Limit, "error", err)
			le.Reject(w)
		}
		return
	}
	if g.cfg.AffinityCookie != nil && proto == "wsmux" {
		w.Header().Add("Set-Cookie", g.cfg.AffinityCookie.String())
	}
	sr, ok := g.startRecording(w, r, user, t, proto, log)
	if !ok {
		return
	}
	log.Info("gateway: session starting")
	start := time.Now()
	var done func()
	rec := spliceRecord{recording: sr}
	// After done(), so the recording's end follows the session's.
	defer func() { sr.end(&rec) }()
	sw := &statusWriter{ResponseWriter: w} // Kubernetes' handlers refuse without a log line
	switch {
	case up != nil:
		done = g.bridge(w, r, up, proto, t.Subresource, &rec)
	case t.Subresource == "portforward":
		// Kubernetes' own tunnelling handler: it answers the WebSocket
		// upgrade and hands the SPDY bytes inside to the bridge as a SPDY
		// upgrade request.
		proxy.NewTunnelingHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			done = g.bridge(w, r, hijackingSPDYUpgrader{}, proto, t.Subresource, &rec)
		})).ServeHTTP(sw, r)
	default:
		g.translate(sw, r, t, &rec)
		rec.wg.Wait() // the in-process bridge has finished
		rec.mu.Lock()
		done = rec.done
		rec.mu.Unlock()
		if done == nil {
			done = func() {}
		}
	}
	if up == nil && !sw.hijacked && sw.status >= 400 {
		g.m.BadRequests.WithLabelValues("bad_upgrade").Inc()
		log.Warn("gateway: WebSocket upgrade failed", "status", sw.status)
	}
	if done != nil {
		// The audit line: who, what, how much, how it ended.
		kv := []any{"command", r.URL.Query()["command"], "container", r.URL.Query().Get("container"),
			"duration", time.Since(start).Round(time.Millisecond).String()}
		if sp := rec.get(); sp != nil {
			in, out := sp.Bytes()
			kv = append(kv, "bytes_from_caller", in, "bytes_to_caller", out)
			if t.Subresource != "portforward" {
				kv = append(kv, "exit", exitStatus(sp.ErrorData()))
			}
		}
		log.Info("gateway: session ended", kv...)
		done() // after the last log line: a drain waits for this
	}
}

// spliceRecord holds the Splicer of a session's bridge (set from another
// goroutine for translated sessions).
type spliceRecord struct {
	mu sync.Mutex
	sp *bridge.Splicer
	// For translated sessions: wg counts the in-process bridges under
	// way, done unregisters the session (called after the audit line).
	wg   sync.WaitGroup
	done func()
	// recording, when the session is recorded, taps its streams.
	recording *sessionRecording
}

func (r *spliceRecord) set(sp *bridge.Splicer) { r.mu.Lock(); r.sp = sp; r.mu.Unlock() }
func (r *spliceRecord) get() *bridge.Splicer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sp
}

// exitStatus reads a command's exit status from its error stream: "0",
// the exit code, "error: MESSAGE", or "unknown" (no status: the session
// was cut).
func exitStatus(data []byte) string {
	if len(data) == 0 {
		return "unknown"
	}
	var st struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		Details struct {
			Causes []struct {
				Type    string `json:"reason"`
				Message string `json:"message"`
			} `json:"causes"`
		} `json:"details"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return "error: " + strings.TrimSpace(string(data)) // protocols before v4: plain text
	}
	if st.Status == "Success" {
		return "0"
	}
	for _, c := range st.Details.Causes {
		if c.Type == "ExitCode" {
			return c.Message
		}
	}
	return "error: " + st.Message
}

// bridge upgrades r with up and splices it to an upstream connection
// opened as the caller; it returns once both are closed, with the
// function that unregisters the session (nil if it never upgraded).
func (g *Gateway) bridge(w http.ResponseWriter, r *http.Request, up k8shttpstream.ResponseUpgrader, proto, kind string, rec *spliceRecord) func() {
	tu := &trackingUpgrader{inner: up, proto: proto, kind: kind, g: g, rec: rec.recording}
	h := &bridge.Handler{Upgrader: tu, Dial: g.dialUpstream, OnSplice: rec.set}
	h.ServeHTTP(w, r) // returns once both connections are closed
	return tu.done
}

// trackingUpgrader registers the upgraded connection with the metrics and
// the shutdown drain; done is set once it upgraded.
type trackingUpgrader struct {
	inner k8shttpstream.ResponseUpgrader
	proto string
	kind  string
	g     *Gateway
	rec   *sessionRecording
	done  func()
}

func (u *trackingUpgrader) UpgradeResponse(w http.ResponseWriter, r *http.Request, h k8shttpstream.NewStreamHandler) k8shttpstream.Connection {
	var sess *mux.Session
	var ready sync.WaitGroup // sess is set before the first stream is handled
	ready.Add(1)
	counted := func(s k8shttpstream.Stream, replySent <-chan struct{}) error {
		ready.Wait()
		if sess != nil && sess.NumStreams() >= u.g.muxCfg.MaxStreams {
			u.g.lim.StreamLimitReached() // its next streams wait for a slot
		}
		if u.rec != nil {
			s = u.rec.wrap(s)
		}
		return h(s, replySent)
	}
	c := u.inner.UpgradeResponse(w, r, counted)
	defer ready.Done()
	if c == nil {
		u.g.m.BadRequests.WithLabelValues("bad_upgrade").Inc()
		u.g.logFor(r).Warn("gateway: downstream upgrade failed", "remote", r.RemoteAddr, "protocol", u.proto)
		return nil
	}
	if wc, ok := c.(wsmuxhttpstream.Connection); ok {
		sess = wc.Session()
	}
	u.g.m.Upgrades.WithLabelValues(u.proto, u.kind).Inc()
	u.rec.watch(c)
	done := u.g.m.Sessions.Add(u.proto, sess, func() { _ = c.Close() })
	u.done = func() {
		if sess != nil {
			u.g.lim.SessionEnded(sess.Err())
		}
		done()
	}
	return c
}

// upstreamURL joins the request's path and query onto the cluster URL.
func (g *Gateway) upstreamURL(r *http.Request) string {
	return g.clusterURL(r.URL.Path, r.URL.RawQuery)
}

// clusterURL joins path and query onto the cluster URL.
func (g *Gateway) clusterURL(path, rawQuery string) string {
	u := *g.base
	u.Path = strings.TrimSuffix(g.base.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = rawQuery
	return u.String()
}

// setImpersonation replaces every Impersonate-* header with the caller's.
func setImpersonation(h http.Header, u controller.User) {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
			delete(h, k)
		}
	}
	h.Set("Impersonate-User", u.Name)
	if u.UID != "" {
		h.Set("Impersonate-Uid", u.UID)
	}
	for _, gr := range u.Groups {
		h.Add("Impersonate-Group", gr)
	}
}

// dialUpstream opens the upstream connection with the cluster's
// credentials. Only the stream protocol versions are taken from the
// caller's request: its Authorization and other headers stay here.
func (g *Gateway) dialUpstream(r *http.Request, protocols []string) (k8shttpstream.Connection, string, error) {
	tlsCfg, err := rest.TLSConfigFor(g.cfg.Cluster)
	if err != nil {
		return nil, "", err
	}
	proxier := g.cfg.Cluster.Proxy
	if proxier == nil {
		proxier = http.ProxyFromEnvironment
	}
	var rt http.RoundTripper
	var newConn func(*http.Response) (k8shttpstream.Connection, error)
	switch g.cfg.Upstream {
	case UpstreamWsmux:
		w, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{TLS: tlsCfg, Proxier: proxier})
		if err != nil {
			return nil, "", err
		}
		rt, newConn = w, w.ForStreaming().NewConnection
	default:
		s, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: tlsCfg, Proxier: proxier})
		if err != nil {
			return nil, "", err
		}
		rt, newConn = s, s.NewConnection
	}
	authRT, err := rest.HTTPWrappersForConfig(g.cfg.Cluster, rt)
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, g.upstreamURL(r), nil)
	if err != nil {
		return nil, "", err
	}
	for _, p := range protocols {
		req.Header.Add(k8shttpstream.HeaderProtocolVersion, p)
	}
	if g.cfg.Impersonate {
		setImpersonation(req.Header, callerOf(r))
	}
	resp, err := authRT.RoundTrip(req)
	if err != nil {
		g.logFor(r).Error("gateway: upstream unreachable", "url", req.URL.Redacted(), "error", err)
		return nil, "", err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		msg := strings.TrimSpace(string(body))
		if msg == "" {
			msg = resp.Status
		}
		g.logFor(r).Warn("gateway: upstream refused the upgrade", "remote", r.RemoteAddr, "url", req.URL.Redacted(), "status", resp.StatusCode, "body", msg)
		status := resp.StatusCode
		if status == http.StatusUnauthorized {
			// The cluster rejected the gateway's credentials, not the
			// caller's: a 401 would tell the caller its token is wrong.
			status = http.StatusBadGateway
			msg = "the cluster rejected the gateway's credentials (401): " + msg
		}
		ue := &bridge.UpstreamError{StatusCode: status, Header: resp.Header, Message: "upstream: " + msg}
		if status == resp.StatusCode && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			ue.Body = body // a metav1.Status: clients decode it
		}
		return nil, "", ue
	}
	conn, err := newConn(resp)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get(k8shttpstream.HeaderProtocolVersion), nil
}
