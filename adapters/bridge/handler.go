package bridge

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// UpstreamDialer opens the upstream connection for a downstream request,
// offering protocols (the client's X-Stream-Protocol-Version values), and
// returns the protocol upstream chose. A failure that carries an HTTP status
// (an *UpstreamError) is answered downstream with that status.
type UpstreamDialer func(r *http.Request, protocols []string) (k8shttpstream.Connection, string, error)

// maxRefusalBody bounds what is read of an upstream's refusal.
const maxRefusalBody = 64 << 10

// UpstreamError is an upstream upgrade that failed with an HTTP answer.
type UpstreamError struct {
	StatusCode int
	Header     http.Header
	Message    string
	// Body, when not nil, is answered downstream as is, with Header's
	// Content-Type (an apiserver's metav1.Status, which clients decode),
	// instead of Message as plain text.
	Body []byte
}

func (e *UpstreamError) Error() string {
	return "bridge: upstream answered " + http.StatusText(e.StatusCode) + ": " + e.Message
}

// Handler is a translating proxy: it negotiates the upstream connection
// first (so X-Stream-Protocol-Version is agreed end to end), then upgrades
// the downstream request with the chosen protocol and splices the two.
// ServeHTTP returns when both connections are closed.
type Handler struct {
	// Upgrader upgrades the downstream request.
	Upgrader k8shttpstream.ResponseUpgrader
	// Dial opens the upstream connection.
	Dial UpstreamDialer
	// OnSplice, if set, is called with every Splicer once it started.
	OnSplice func(*Splicer)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !k8shttpstream.IsUpgradeRequest(r) {
		http.Error(w, "bridge: not an upgrade request", http.StatusBadRequest)
		return
	}
	protocols := commaValues(r.Header.Values(k8shttpstream.HeaderProtocolVersion))
	up, proto, err := h.Dial(r, protocols)
	if err != nil {
		var ue *UpstreamError
		if errors.As(err, &ue) && ue.StatusCode >= 400 {
			if v := ue.Header.Values(k8shttpstream.HeaderAcceptedProtocolVersions); len(v) > 0 {
				w.Header()[k8shttpstream.HeaderAcceptedProtocolVersions] = v
			}
			if ue.Body != nil {
				w.Header().Set("Content-Type", ue.Header.Get("Content-Type"))
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.WriteHeader(ue.StatusCode)
				_, _ = w.Write(ue.Body)
				return
			}
			http.Error(w, ue.Message, ue.StatusCode)
			return
		}
		http.Error(w, "bridge: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	if proto != "" {
		w.Header().Set(k8shttpstream.HeaderProtocolVersion, proto)
	}
	s := New(up)
	down := h.Upgrader.UpgradeResponse(w, r, s.NewStreamHandler)
	if down == nil {
		_ = up.Close()
		return
	}
	s.Start(down)
	if h.OnSplice != nil {
		h.OnSplice(s)
	}
	s.Wait()
}

func commaValues(vs []string) []string {
	var out []string
	for _, v := range vs {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// upstreamURL joins the downstream request's path and query onto base.
func upstreamURL(base *url.URL, r *http.Request) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	return &u
}

// upgradeRoundTripper is what both upstream kinds have in common.
type upgradeRoundTripper interface {
	http.RoundTripper
	NewConnection(*http.Response) (k8shttpstream.Connection, error)
}

func dialUpstream(rt upgradeRoundTripper, r *http.Request, u *url.URL, protocols []string) (k8shttpstream.Connection, string, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header = forwardHeaders(r.Header)
	for _, p := range protocols {
		req.Header.Add(k8shttpstream.HeaderProtocolVersion, p)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		hdr := resp.Header
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		_, cerr := rt.NewConnection(resp) // its reading of the refusal
		msg := resp.Status
		if cerr != nil {
			msg = cerr.Error()
		}
		ue := &UpstreamError{StatusCode: resp.StatusCode, Header: hdr, Message: msg}
		if strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			// An apiserver's metav1.Status: passed on as it is, so the
			// client prints the cluster's own refusal (kubectl: "Error
			// from server (Forbidden): ...").
			ue.Body = body
		}
		return nil, "", ue
	}
	conn, err := rt.NewConnection(resp)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get(k8shttpstream.HeaderProtocolVersion), nil
}

// SPDYUpstream dials base (plus the request's path and query) with the
// SPDY round tripper of k8s.io/streaming.
func SPDYUpstream(base *url.URL, tlsConfig *tls.Config) UpstreamDialer {
	return func(r *http.Request, protocols []string) (k8shttpstream.Connection, string, error) {
		rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: tlsConfig, Proxier: noProxy})
		if err != nil {
			return nil, "", err
		}
		return dialUpstream(rt, r, upstreamURL(base, r), protocols)
	}
}

// WsmuxUpstream dials base (plus the request's path and query) with wsmux's
// round tripper.
func WsmuxUpstream(base *url.URL, tlsConfig *tls.Config) UpstreamDialer {
	return func(r *http.Request, protocols []string) (k8shttpstream.Connection, string, error) {
		rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{TLS: tlsConfig, Proxier: noProxy})
		if err != nil {
			return nil, "", err
		}
		return dialUpstream(rt.ForStreaming(), r, upstreamURL(base, r), protocols)
	}
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// NewWsmuxToSPDY accepts wsmux clients and forwards to a SPDY server at
// upstream (e.g. an unmodified kubelet or CRI streaming server).
func NewWsmuxToSPDY(upstream *url.URL, tlsConfig *tls.Config) *Handler {
	return &Handler{
		Upgrader: wsmuxhttpstream.NewResponseUpgraderForStreaming(),
		Dial:     SPDYUpstream(upstream, tlsConfig),
	}
}

// NewSPDYToWsmux accepts SPDY clients (kubectl today) and forwards to a
// wsmux server at upstream.
func NewSPDYToWsmux(upstream *url.URL, tlsConfig *tls.Config) *Handler {
	return &Handler{
		Upgrader: spdy.NewResponseUpgrader(),
		Dial:     WsmuxUpstream(upstream, tlsConfig),
	}
}
