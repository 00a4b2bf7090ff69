package wshandshake

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PrepareRequest turns req (cloned by the caller) into a WebSocket upgrade
// offering Subprotocol and returns the key to check the answer with. The
// method becomes GET: RFC 6455 requires it, and WebSocket proxies pass
// nothing else (kubectl's SPDY requests are POSTs). Other headers of req
// (Authorization, X-Stream-Protocol-Version...) are kept.
func PrepareRequest(req *http.Request) (key string) {
	key = NewKey()
	req.Method = http.MethodGet
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	h := req.Header
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", key)
	h.Set("Sec-WebSocket-Protocol", Subprotocol)
	h.Del("Sec-WebSocket-Extensions") // no permessage-deflate
	return key
}

// CheckResponse validates the answer to a request prepared with key: a 101
// switching to websocket, the right Sec-WebSocket-Accept, Subprotocol
// selected and no extension. Anything else is a *HandshakeError with the
// response's status and headers (not its body: a caller that wants it reads
// resp.Body).
func CheckResponse(resp *http.Response, key string) *HandshakeError {
	fail := func(format string, a ...any) *HandshakeError {
		return &HandshakeError{StatusCode: resp.StatusCode, Header: resp.Header, Reason: fmt.Sprintf(format, a...)}
	}
	switch p := strings.TrimSpace(resp.Header.Get("Sec-WebSocket-Protocol")); {
	case resp.StatusCode != http.StatusSwitchingProtocols:
		return fail("status %d, want 101", resp.StatusCode)
	case !headerContains(resp.Header, "Connection", "upgrade"):
		return fail("response lacks Connection: Upgrade")
	case !headerContains(resp.Header, "Upgrade", "websocket"):
		return fail("response lacks Upgrade: websocket")
	case resp.Header.Get("Sec-WebSocket-Accept") != AcceptKey(key):
		return fail("bad Sec-WebSocket-Accept %q", resp.Header.Get("Sec-WebSocket-Accept"))
	case p == "":
		return fail("server did not select subprotocol %s", Subprotocol)
	case p != Subprotocol:
		return fail("server selected subprotocol %q, which was not offered (want %s)", p, Subprotocol)
	case resp.Header.Get("Sec-WebSocket-Extensions") != "":
		return fail("server selected WebSocket extensions; none were offered")
	}
	return nil
}

// DialOptions configure Dial. The zero value is usable.
type DialOptions struct {
	// Header holds extra request headers (e.g. Authorization,
	// X-Stream-Protocol-Version). The handshake's own headers (Upgrade,
	// Connection, Sec-WebSocket-*) are overwritten.
	Header http.Header
	// TLSConfig configures TLS for wss:// (and https://) URLs; nil means the
	// defaults. An empty ServerName is taken from the URL. ALPN, if the
	// config asks for it, is restricted to http/1.1, the only protocol a
	// WebSocket upgrade can use.
	TLSConfig *tls.Config
	// NetDial opens the TCP connection; nil means a net.Dialer.
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the whole handshake; zero means DefaultHandshakeTimeout.
	// The context's deadline applies as well.
	Timeout time.Duration
}

// Dial opens a WebSocket connection to a ws:// or wss:// URL (http:// and
// https:// are mapped to them) offering Sec-WebSocket-Protocol: wsmux.v1, and
// requires the server to select it (PrepareRequest and CheckResponse).
//
// It returns the connection, the buffered reader holding any bytes the server
// sent past the handshake (nil when there are none), and the response
// headers: every header the server sent except the handshake's own (Upgrade,
// Connection, Sec-WebSocket-Accept, Sec-WebSocket-Extensions), with
// Sec-WebSocket-Protocol.
//
// A status other than 101 returns a *HandshakeError with the server's status
// code, headers and body (up to MaxHandshakeBody bytes); a 101 that is not a
// valid wsmux.v1 answer returns a *HandshakeError with StatusCode 101 and a
// Reason. Other failures (network, TLS, a malformed response, the timeout or
// the context) are returned wrapped.
func Dial(ctx context.Context, rawURL string, opts DialOptions) (net.Conn, *bufio.Reader, http.Header, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("wshandshake: dial: %w", err)
	}
	secure := false
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		u.Scheme = "http"
	case "wss", "https":
		u.Scheme, secure = "https", true
	default:
		return nil, nil, nil, fmt.Errorf("wshandshake: dial %s: unsupported scheme %q (want ws, wss, http or https)", u.Redacted(), u.Scheme)
	}
	if u.Host == "" {
		return nil, nil, nil, fmt.Errorf("wshandshake: dial %s: no host", u.Redacted())
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	wrap := func(what string, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return fmt.Errorf("wshandshake: dial %s: %s: %w", u.Redacted(), what, err)
	}

	dial := opts.NetDial
	if dial == nil {
		d := &net.Dialer{Timeout: timeout}
		dial = d.DialContext
	}
	port := u.Port()
	if port == "" {
		port = map[bool]string{false: "80", true: "443"}[secure]
	}
	nc, err := dial(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, nil, nil, wrap("connect", err)
	}
	// One deadline for the whole handshake; the context cuts it short.
	_ = nc.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	conn := nc
	fail := func(err error) (net.Conn, *bufio.Reader, http.Header, error) {
		stop()
		_ = conn.Close()
		return nil, nil, nil, err
	}

	if secure {
		cfg := &tls.Config{}
		if opts.TLSConfig != nil {
			cfg = opts.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		if len(cfg.NextProtos) > 0 {
			cfg.NextProtos = []string{"http/1.1"}
		}
		tc := tls.Client(nc, cfg)
		conn = tc
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(wrap("TLS", err))
		}
	}

	req := &http.Request{
		Method:     http.MethodGet,
		URL:        &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     opts.Header.Clone(),
		Host:       u.Host,
	}
	key := PrepareRequest(req)
	if err := req.Write(conn); err != nil {
		return fail(wrap("writing the upgrade request", err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(wrap("reading the response", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// The body is read only up to MaxHandshakeBody and never drained:
		// the connection is closed right after.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxHandshakeBody))
		he := &HandshakeError{StatusCode: resp.StatusCode, Header: resp.Header}
		if len(body) > 0 {
			he.Body = body
		}
		return fail(he)
	}
	if he := CheckResponse(resp, key); he != nil {
		return fail(he)
	}
	if !stop() {
		// The context ended as the handshake did: its deadline is spoilt.
		_ = conn.Close()
		return nil, nil, nil, wrap("handshake", ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	hdr := resp.Header.Clone()
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Accept", "Sec-Websocket-Extensions"} {
		hdr.Del(k)
	}
	hdr.Set("Sec-WebSocket-Protocol", Subprotocol)
	if br.Buffered() == 0 {
		br = nil
	}
	return conn, br, hdr, nil
}
