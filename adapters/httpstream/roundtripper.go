package httpstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/wsmux/wsmux/internal/wshandshake"
	"github.com/wsmux/wsmux/mux"
	"golang.org/x/net/proxy"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Subprotocol is the WebSocket subprotocol the round tripper offers and the
// response upgrader requires. It deliberately matches neither
// v5.channel.k8s.io nor SPDY/3.1+...k8s.io, the two upgrades the
// apiserver intercepts; every other upgrade it proxies byte for byte.
const Subprotocol = mux.Subprotocol

// RoundTripper upgrades an HTTP request to a wsmux WebSocket connection. It
// implements k8s.io/apimachinery's httpstream.UpgradeRoundTripper and
// client-go's transport/spdy.Upgrader, so spdy.Negotiate, spdy.NewDialer,
// remotecommand.NewSPDYExecutorForTransports and portforward.New take it
// unchanged; ForStreaming gives the k8s.io/streaming variant.
//
// Like the SPDY round tripper it remembers the connection of its last
// RoundTrip for NewConnection: use one RoundTripper per connection.
type RoundTripper struct {
	// Dialer opens TCP connections (to the server or the proxy); nil means
	// a zero net.Dialer.
	Dialer *net.Dialer

	tlsConfig        *tls.Config
	proxier          func(*http.Request) (*url.URL, error)
	pingPeriod       time.Duration
	upgradeTransport http.RoundTripper
	muxConfig        *mux.Config
	resume           resumeOptions

	mu      sync.Mutex
	conn    net.Conn
	br      *bufio.Reader
	key     string
	pending *pendingSession // RoundTrip's resumable session
}

var (
	_ apihttpstream.UpgradeRoundTripper = (*RoundTripper)(nil)
	_ k8shttpstream.UpgradeRoundTripper = (*StreamingRoundTripper)(nil)
)

// RoundTripperConfig configures a RoundTripper; the fields are those of the
// SPDY package's RoundTripperConfig plus Config.
type RoundTripperConfig struct {
	// TLS configures https:// connections when UpgradeTransport is not set.
	TLS *tls.Config
	// Proxier picks a proxy per request (http://, https:// via HTTP
	// CONNECT, socks5://); nil means http.ProxyFromEnvironment.
	Proxier func(*http.Request) (*url.URL, error)
	// PingPeriod sends a keepalive PING after this long without sending
	// (0: wsmux's default keepalive).
	PingPeriod time.Duration
	// UpgradeTransport, if set, supplies the dialer and TLS configuration
	// instead of TLS and Proxier (mutually exclusive with them).
	UpgradeTransport http.RoundTripper
	// Config tunes the wsmux sessions; nil means mux's defaults.
	Config *mux.Config
	// Resume offers session resumption (docs/spec/wsmux-resume-v1.md):
	// with a server that supports it, a dropped connection suspends the
	// session (streams wait, nothing is lost) while the round tripper
	// redials the same URL, with the same headers, for ResumeTimeout; the
	// session then goes on where it stopped. With a server that does not,
	// the connection behaves as without it. Config.Resume set means the
	// same. Cookies the upgrade answers set (a load balancer's stickiness
	// cookie) are sent with the resumes, so they reach the same replica.
	Resume bool
	// ResumeTimeout bounds each suspension (0: Config.ResumeTimeout, or
	// mux's default, 30 s).
	ResumeTimeout time.Duration
	// OnResumeEvent, when set, is called for every drop, resume, refused
	// resume and failed redial of a resumable connection (to log them:
	// the adapter does not log). It runs on the redialling goroutine.
	OnResumeEvent func(ResumeEvent)
}

// NewRoundTripper returns a RoundTripper using tlsConfig for https URLs.
func NewRoundTripper(tlsConfig *tls.Config) (*RoundTripper, error) {
	return NewRoundTripperWithConfig(RoundTripperConfig{TLS: tlsConfig})
}

// NewRoundTripperWithProxy returns a RoundTripper using tlsConfig and the
// given proxy function.
func NewRoundTripperWithProxy(tlsConfig *tls.Config, proxier func(*http.Request) (*url.URL, error)) (*RoundTripper, error) {
	return NewRoundTripperWithConfig(RoundTripperConfig{TLS: tlsConfig, Proxier: proxier})
}

// NewRoundTripperWithConfig returns a RoundTripper configured by cfg.
func NewRoundTripperWithConfig(cfg RoundTripperConfig) (*RoundTripper, error) {
	if cfg.UpgradeTransport != nil {
		if cfg.TLS != nil || cfg.Proxier != nil {
			return nil, errors.New("wsmux RoundTripper: UpgradeTransport is mutually exclusive to TLSConfig or Proxier")
		}
		tlsConfig, err := tlsConfigForTransport(cfg.UpgradeTransport)
		if err != nil {
			return nil, fmt.Errorf("wsmux RoundTripper: unable to retrieve TLS config from UpgradeTransport: %w", err)
		}
		cfg.TLS = tlsConfig
	}
	if cfg.Proxier == nil {
		cfg.Proxier = http.ProxyFromEnvironment
	}
	if err := cfg.Config.Validate(); err != nil {
		return nil, err
	}
	return &RoundTripper{
		tlsConfig:        cfg.TLS,
		proxier:          cfg.Proxier,
		pingPeriod:       cfg.PingPeriod,
		upgradeTransport: cfg.UpgradeTransport,
		muxConfig:        cfg.Config,
		resume: resumeOptions{on: cfg.Resume || (cfg.Config != nil && cfg.Config.Resume),
			timeout: cfg.ResumeTimeout, onEvent: cfg.OnResumeEvent},
	}, nil
}

// TLSClientConfig returns the TLS configuration (for client-go's
// TLSClientConfigHolder checks when proxying).
func (rt *RoundTripper) TLSClientConfig() *tls.Config { return rt.tlsConfig }

// RoundTrip sends req as a WebSocket upgrade offering wsmux.v1 (always as
// a GET, as RFC 6455 requires) and returns the server's response: the 101
// with all its headers (X-Stream-Protocol-Version included) on success, any
// other response with its body for NewConnection to report.
func (rt *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header = req.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	switch req.URL.Scheme {
	case "ws":
		req.URL.Scheme = "http"
	case "wss":
		req.URL.Scheme = "https"
	}
	req.Body, req.ContentLength = nil, 0
	if rt.resume.on {
		return rt.roundTripResume(req)
	}
	key := wshandshake.PrepareRequest(req)
	conn, err := rt.Dial(req)
	if err != nil {
		return nil, err
	}
	// The handshake is bounded by the request's context.
	stop := context.AfterFunc(req.Context(), func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if !stop() {
		conn.Close()
		if err == nil {
			err = req.Context().Err()
		}
		return nil, err
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = &closeBoth{ReadCloser: resp.Body, conn: conn}
		return resp, nil
	}
	rt.setPending(nil) // an earlier upgrade never claimed by NewConnection
	rt.mu.Lock()
	rt.conn, rt.br, rt.key = conn, br, key
	rt.mu.Unlock()
	return resp, nil
}

type closeBoth struct {
	io.ReadCloser
	conn net.Conn
}

func (c *closeBoth) Close() error {
	err := c.ReadCloser.Close()
	c.conn.Close()
	return err
}

// NewConnection validates the upgrade response of the last RoundTrip and
// starts the client side of the wsmux connection. A failed upgrade returns
// a *k8s.io/apimachinery/pkg/util/httpstream.UpgradeFailureError whose Cause
// is an *UpgradeError with the server's status and body, so client-go's
// fallback executor and dialer fall back to SPDY.
func (rt *RoundTripper) NewConnection(resp *http.Response) (apihttpstream.Connection, error) {
	c, uerr, err := rt.newConnection(resp)
	if uerr != nil {
		return nil, &apihttpstream.UpgradeFailureError{Cause: uerr}
	}
	if err != nil {
		return nil, err
	}
	return compat{c}, nil
}

// ForStreaming returns the k8s.io/streaming view of rt (the same round
// tripper; NewConnection returns k8s.io/streaming types).
func (rt *RoundTripper) ForStreaming() *StreamingRoundTripper { return &StreamingRoundTripper{rt} }

// StreamingRoundTripper is a RoundTripper whose NewConnection returns the
// k8s.io/streaming types: a k8s.io/streaming/pkg/httpstream.UpgradeRoundTripper.
type StreamingRoundTripper struct{ *RoundTripper }

// NewConnection is RoundTripper.NewConnection with k8s.io/streaming types;
// a failed upgrade is a *k8s.io/streaming/pkg/httpstream.UpgradeFailureError.
func (s *StreamingRoundTripper) NewConnection(resp *http.Response) (k8shttpstream.Connection, error) {
	c, uerr, err := s.RoundTripper.newConnection(resp)
	if uerr != nil {
		return nil, &k8shttpstream.UpgradeFailureError{Cause: uerr}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// UpgradeError is why an upgrade failed: the server's status and body (a
// non-wsmux server, e.g. an unpatched kubelet, answers 400 or 403).
type UpgradeError struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	Reason     string
}

func (e *UpgradeError) Error() string {
	s := fmt.Sprintf("wsmux upgrade failed: %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if m := upgradeErrorMessage(e.Body); m != "" {
		s += ": " + m
	}
	return s
}

const maxErrorBody = 64 << 10

func (rt *RoundTripper) newConnection(resp *http.Response) (*connection, *UpgradeError, error) {
	if rt.resume.on {
		p := rt.takePending()
		switch {
		case resp.StatusCode != http.StatusSwitchingProtocols:
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			return nil, &UpgradeError{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
		case p == nil:
			return nil, nil, errors.New("wsmux: NewConnection without a successful RoundTrip on this RoundTripper")
		case p.c == nil:
			return nil, &UpgradeError{StatusCode: resp.StatusCode, Header: resp.Header, Reason: p.reason}, nil
		}
		return p.c, nil, nil
	}
	rt.mu.Lock()
	conn, br, key := rt.conn, rt.br, rt.key
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rt.conn, rt.br, rt.key = nil, nil, ""
	}
	rt.mu.Unlock()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, &UpgradeError{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
	}
	if conn == nil {
		return nil, nil, errors.New("wsmux: NewConnection without a successful RoundTrip on this RoundTripper")
	}
	if err := wshandshake.CheckResponse(resp, key); err != nil {
		conn.Close()
		return nil, &UpgradeError{StatusCode: resp.StatusCode, Header: resp.Header, Reason: err.Reason}, nil
	}
	if br.Buffered() == 0 {
		br = nil
	}
	c, err := newConnection(conn, br, true, rt.muxConfig, rt.pingPeriod, nil)
	if err != nil {
		return nil, nil, err
	}
	return c, nil, nil
}

// upgradeErrorMessage extracts a metav1.Status-like message from a body.
func upgradeErrorMessage(b []byte) string {
	var st struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(b, &st) == nil {
		if m := strings.TrimSpace(st.Message); m != "" {
			return m
		}
		if m := strings.TrimSpace(st.Error); m != "" {
			return m
		}
	}
	m := strings.TrimSpace(string(b))
	if len(m) > 512 {
		m = m[:512]
	}
	return m
}

// Dial opens the network connection for an upgrade request (directly, via
// the proxy, or with UpgradeTransport's dialer; TLS for https) and writes
// the request on it.
func (rt *RoundTripper) Dial(req *http.Request) (net.Conn, error) {
	var conn net.Conn
	var err error
	if rt.upgradeTransport != nil {
		conn, err = dialWithTransport(req.Context(), req.URL, rt.upgradeTransport)
	} else {
		conn, err = rt.dial(req)
	}
	if err != nil {
		return nil, err
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (rt *RoundTripper) netDialer() *net.Dialer {
	if rt.Dialer != nil {
		return rt.Dialer
	}
	return &net.Dialer{}
}

func (rt *RoundTripper) dial(req *http.Request) (net.Conn, error) {
	proxyURL, err := rt.proxier(req)
	if err != nil {
		return nil, err
	}
	if proxyURL == nil {
		return rt.dialDirect(req.Context(), req.URL)
	}
	switch proxyURL.Scheme {
	case "socks5":
		return rt.dialSocks5(req, proxyURL)
	case "http", "https", "":
		return rt.dialConnect(req, proxyURL)
	}
	return nil, fmt.Errorf("proxy URL scheme not supported: %s", proxyURL.Scheme)
}

func (rt *RoundTripper) dialDirect(ctx context.Context, u *url.URL) (net.Conn, error) {
	addr := canonicalAddr(u)
	if u.Scheme == "http" {
		return rt.netDialer().DialContext(ctx, "tcp", addr)
	}
	d := tls.Dialer{NetDialer: rt.netDialer(), Config: http11Only(rt.tlsConfig)}
	return d.DialContext(ctx, "tcp", addr)
}

// dialConnect tunnels through an HTTP(S) proxy with CONNECT.
func (rt *RoundTripper) dialConnect(req *http.Request, proxyURL *url.URL) (net.Conn, error) {
	target := canonicalAddr(req.URL)
	pconn, err := rt.dialDirect(req.Context(), proxyURL)
	if err != nil {
		return nil, err
	}
	creq := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: http.Header{}}
	if u := proxyURL.User; u != nil {
		pw, _ := u.Password()
		creq.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	creq = creq.WithContext(req.Context())
	stop := context.AfterFunc(req.Context(), func() { _ = pconn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := creq.Write(pconn); err != nil {
		pconn.Close()
		return nil, err
	}
	br := bufio.NewReader(pconn)
	resp, err := http.ReadResponse(br, creq)
	if err != nil {
		pconn.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		pconn.Close()
		return nil, fmt.Errorf("CONNECT request to %s returned response: %s", proxyURL.Redacted(), resp.Status)
	}
	if br.Buffered() > 0 {
		pconn.Close()
		return nil, errors.New("proxy sent data before the tunnel was used")
	}
	if req.URL.Scheme == "https" {
		return rt.tlsClient(req.Context(), pconn, target)
	}
	return pconn, nil
}

func (rt *RoundTripper) dialSocks5(req *http.Request, proxyURL *url.URL) (net.Conn, error) {
	var auth *proxy.Auth
	if proxyURL.User != nil {
		pw, _ := proxyURL.User.Password()
		auth = &proxy.Auth{User: proxyURL.User.Username(), Password: pw}
	}
	d, err := proxy.SOCKS5("tcp", canonicalAddr(proxyURL), auth, rt.netDialer())
	if err != nil {
		return nil, err
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		return nil, errors.New("SOCKS5 dialer must implement ContextDialer")
	}
	target := canonicalAddr(req.URL)
	conn, err := cd.DialContext(req.Context(), "tcp", target)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		return rt.tlsClient(req.Context(), conn, target)
	}
	return conn, nil
}

func (rt *RoundTripper) tlsClient(ctx context.Context, conn net.Conn, target string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		conn.Close()
		return nil, err
	}
	cfg := http11Only(rt.tlsConfig)
	if cfg == nil {
		cfg = &tls.Config{ServerName: host}
	} else if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// http11Only restricts ALPN to http/1.1, the only protocol a WebSocket
// upgrade can use.
func http11Only(cfg *tls.Config) *tls.Config {
	if cfg == nil || len(cfg.NextProtos) == 0 {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http", "ws":
			port = "80"
		default:
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

type tlsConfigHolder interface{ TLSClientConfig() *tls.Config }

type wrapper interface {
	http.RoundTripper
	WrappedRoundTripper() http.RoundTripper
}

func tlsConfigForTransport(t http.RoundTripper) (*tls.Config, error) {
	switch t := t.(type) {
	case nil:
		return nil, nil
	case *http.Transport:
		return t.TLSClientConfig, nil
	case tlsConfigHolder:
		return t.TLSClientConfig(), nil
	case wrapper:
		return tlsConfigForTransport(t.WrappedRoundTripper())
	default:
		return nil, fmt.Errorf("transport %T does not expose TLS client config", t)
	}
}

func dialerFor(t http.RoundTripper) func(ctx context.Context, network, addr string) (net.Conn, error) {
	switch t := t.(type) {
	case *http.Transport:
		if t.DialContext != nil {
			return t.DialContext
		}
	case wrapper:
		return dialerFor(t.WrappedRoundTripper())
	}
	return (&net.Dialer{}).DialContext
}

// dialWithTransport dials with an UpgradeTransport's dialer and TLS config.
func dialWithTransport(ctx context.Context, u *url.URL, t http.RoundTripper) (net.Conn, error) {
	addr := canonicalAddr(u)
	conn, err := dialerFor(t)(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http":
		return conn, nil
	case "https":
	default:
		conn.Close()
		return nil, fmt.Errorf("unknown scheme: %s", u.Scheme)
	}
	cfg, _ := tlsConfigForTransport(t)
	cfg = http11Only(cfg)
	if cfg == nil {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, _ := net.SplitHostPort(addr)
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
