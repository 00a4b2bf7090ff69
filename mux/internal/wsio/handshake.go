package wsio

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gobwas/ws"
)

// DefaultHandshakeTimeout bounds a handshake (connect, TLS and HTTP upgrade
// on the client; writing the response on the server) when no other timeout is
// given.
const DefaultHandshakeTimeout = 10 * time.Second

// MaxHandshakeBody is how much of a failed handshake's response body Dial
// keeps in HandshakeError.Body.
const MaxHandshakeBody = 64 << 10

// DialOptions configure Dial. The zero value is usable.
type DialOptions struct {
	// Header holds extra request headers (e.g. Authorization,
	// X-Stream-Protocol-Version). It must not set the handshake's own
	// headers (Upgrade, Connection, Sec-WebSocket-*).
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
// requires the server to select it.
//
// It returns the connection, the buffered reader holding any bytes the server
// sent past the handshake (nil when there are none; pass both to New), and
// the response headers: every header the server sent except the handshake's
// own (Upgrade, Connection, Sec-WebSocket-Accept, Sec-WebSocket-Extensions),
// plus Sec-WebSocket-Protocol.
//
// A status other than 101 returns a *HandshakeError with the server's status
// code, headers and body (up to MaxHandshakeBody bytes); a 101 that did not
// select wsmux.v1 returns a *HandshakeError with StatusCode 101 and a Reason.
// Other failures (network, TLS, a malformed or invalid response) are returned
// wrapped.
func Dial(ctx context.Context, rawURL string, opts DialOptions) (net.Conn, *bufio.Reader, http.Header, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("wsio: dial: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "ws", "http":
		u.Scheme = "ws"
	case "wss", "https":
		u.Scheme = "wss"
	default:
		return nil, nil, nil, fmt.Errorf("wsio: dial %s: unsupported scheme %q", u.Redacted(), u.Scheme)
	}

	respHeader := make(http.Header)
	var statusErr *HandshakeError
	d := ws.Dialer{
		Timeout:   opts.Timeout,
		Protocols: []string{Subprotocol},
		NetDial:   opts.NetDial,
		TLSConfig: opts.TLSConfig,
		OnHeader: func(key, value []byte) error {
			respHeader.Add(string(key), string(value))
			return nil
		},
		OnStatusError: func(status int, _ []byte, resp io.Reader) {
			statusErr = readStatusError(status, resp)
		},
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultHandshakeTimeout
	}
	if c := opts.TLSConfig; c != nil && len(c.NextProtos) > 0 {
		c = c.Clone()
		c.NextProtos = []string{"http/1.1"}
		d.TLSConfig = c
	}
	if len(opts.Header) > 0 {
		d.Header = ws.HandshakeHeaderHTTP(opts.Header)
	}

	conn, br, hs, err := d.Dial(ctx, u.String())
	switch {
	case err != nil && statusErr != nil:
		return nil, nil, nil, statusErr
	case errors.Is(err, ws.ErrHandshakeBadSubProtocol):
		return nil, nil, nil, &HandshakeError{
			StatusCode: http.StatusSwitchingProtocols,
			Header:     respHeader,
			Reason:     "server selected a subprotocol that was not offered (want " + Subprotocol + ")",
		}
	case err != nil:
		return nil, nil, nil, fmt.Errorf("wsio: dial %s: %w", u.Redacted(), err)
	case hs.Protocol != Subprotocol:
		_ = conn.Close()
		if br != nil {
			ws.PutReader(br)
		}
		return nil, nil, nil, &HandshakeError{
			StatusCode: http.StatusSwitchingProtocols,
			Header:     respHeader,
			Reason:     "server did not select subprotocol " + Subprotocol,
		}
	}
	respHeader.Set("Sec-WebSocket-Protocol", hs.Protocol)
	return conn, br, respHeader, nil
}

// readStatusError parses a non-101 response (status line included) for
// Dial. The reader is only valid during the Dialer's callback.
func readStatusError(status int, resp io.Reader) *HandshakeError {
	e := &HandshakeError{StatusCode: status}
	r, err := http.ReadResponse(bufio.NewReader(resp), nil)
	if err != nil {
		e.Reason = "malformed response: " + err.Error()
		return e
	}
	e.Header = r.Header
	// The body is read only up to MaxHandshakeBody and never drained: the
	// connection is closed right after.
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxHandshakeBody))
	if len(body) > 0 {
		e.Body = body
	}
	return e
}

// Upgrade upgrades a net/http request to a WebSocket connection selecting
// wsmux.v1, writing respHeader (may be nil) into the 101 response.
//
// If the client did not offer wsmux.v1 it answers 400 Bad Request with a
// plain-text body, without hijacking, and returns a *HandshakeError. Any other
// invalid upgrade request is answered by gobwas/ws with the matching status
// (400, 405, 426, ...) and also returns a *HandshakeError.
//
// On success it returns the hijacked connection and its buffered reader,
// which may hold bytes the client sent past the handshake (pass both to
// New). The request must not be used afterwards.
func Upgrade(w http.ResponseWriter, r *http.Request, respHeader http.Header) (net.Conn, *bufio.Reader, error) {
	if !offersSubprotocol(r.Header) {
		reason := "client did not offer WebSocket subprotocol " + Subprotocol
		http.Error(w, reason, http.StatusBadRequest)
		return nil, nil, &HandshakeError{StatusCode: http.StatusBadRequest, Reason: reason}
	}
	u := ws.HTTPUpgrader{
		Timeout:  DefaultHandshakeTimeout,
		Header:   respHeader,
		Protocol: func(p string) bool { return p == Subprotocol },
	}
	conn, rw, hs, err := u.Upgrade(r, w)
	if err != nil {
		code := http.StatusInternalServerError
		var rej *ws.ConnectionRejectedError
		if errors.As(err, &rej) && rej.StatusCode() != 0 {
			code = rej.StatusCode()
		}
		if conn != nil {
			_ = conn.Close()
		}
		return nil, nil, &HandshakeError{StatusCode: code, Reason: err.Error()}
	}
	if hs.Protocol != Subprotocol {
		// Unreachable: the offer was checked above.
		_ = conn.Close()
		return nil, nil, &HandshakeError{StatusCode: http.StatusSwitchingProtocols, Reason: "subprotocol " + Subprotocol + " not selected"}
	}
	return conn, rw.Reader, nil
}

// offersSubprotocol reports whether Sec-WebSocket-Protocol lists wsmux.v1.
func offersSubprotocol(h http.Header) bool {
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.Trim(p, " \t") == Subprotocol {
				return true
			}
		}
	}
	return false
}
