package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/mux"
)

// checkServerURL validates --server before anything connects: a scheme
// among http, https, ws and wss, and a host. Errors are usage errors that
// show the URL to type instead.
func checkServerURL(raw string) error {
	if raw == "" {
		return usageErrorf("--server is required: the server's URL, for example https://gw.example:8443")
	}
	if !strings.Contains(raw, "://") {
		return usageErrorf("--server %q has no scheme: use http://%s (or https://%s for a TLS server)", raw, raw, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return usageErrorf("--server %q: %v", raw, err)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return usageErrorf("--server %q: scheme %q: use http://, https://, ws:// or wss://", raw, u.Scheme)
	}
	if u.Host == "" {
		return usageErrorf("--server %q: no host: use %s://HOST:PORT", raw, u.Scheme)
	}
	return nil
}

// connectError turns the failure of a client's first connection to the
// server into an error that says what to do: exit code 3 for rejected
// credentials (401), 1 otherwise, with a hint for the common mistakes
// (http:// against a TLS server and the reverse, an unknown certificate
// authority, a timeout, nothing listening, a server that does not speak
// wsmux). what names the request, for example "GET https://gw/api/...".
func connectError(err error, server, what string, dialTimeout time.Duration) error {
	if err == nil {
		return nil
	}
	status, body, ok := handshakeStatus(err)
	useHTTPS := fmt.Errorf("%s: the server speaks TLS: use https:// in --server (got %s)", what, server)
	if ok && status == http.StatusBadRequest && speaksTLS(server, dialTimeout) {
		return useHTTPS
	}
	switch {
	case ok && status == http.StatusUnauthorized:
		return authError(fmt.Errorf("%s: the server rejected the credentials (401): %s; check --token-file (or --client-cert)",
			what, firstLine(body)))
	case ok && status == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server"):
		return fmt.Errorf("%s: the server speaks TLS: use https:// in --server (got %s)", what, server)
	case ok && status == http.StatusForbidden:
		return fmt.Errorf("%s: the server answered 403 Forbidden: %s; it does not speak wsmux (subprotocol %s), "+
			"a proxy in between refused the WebSocket upgrade, or it forbids this request", what, firstLine(body), mux.Subprotocol)
	case ok && status == http.StatusTooManyRequests:
		return fmt.Errorf("%s: the server refused the session (429 Too Many Requests): %s; close other sessions or retry later",
			what, firstLine(body))
	case ok && status == http.StatusNotFound:
		return fmt.Errorf("%s: the server answered 404 Not Found: check the URL in --server (and that it is a wsmux server)", what)
	case ok:
		return fmt.Errorf("%s: the server answered %d %s: %s", what, status, http.StatusText(status), firstLine(body))
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.As(err, &ua) || strings.Contains(err.Error(), "certificate signed by unknown authority"):
		return fmt.Errorf("%s: the server's certificate is signed by an unknown authority: pass --ca-file with the CA "+
			"certificate that signed it (or --insecure-skip-tls-verify, for tests only): %w", what, err)
	case errors.As(err, &he):
		return fmt.Errorf("%s: the server's certificate is not valid for this host name: use a host name it was issued for in --server: %w",
			what, err)
	case errors.As(err, &ci):
		return fmt.Errorf("%s: the server's certificate is not valid (%v): renew it, or check the clock", what, err)
	case errors.As(err, &rh) || strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return fmt.Errorf("%s: the server does not speak TLS: use http:// in --server (got %s)", what, server)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: nothing listens there (connection refused): check the host and port in --server and that the server runs", what)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(),
		strings.Contains(err.Error(), "no answer from the server within"):
		return fmt.Errorf("%s: no answer within %s (--dial-timeout): check the address in --server and the network, "+
			"or raise --dial-timeout", what, dialTimeout)
	}
	if !ok && speaksTLS(server, dialTimeout) {
		return useHTTPS // an HTTP/1.0 400 from Go's TLS server, say
	}
	return fmt.Errorf("%s: %w", what, err)
}

// speaksTLS reports whether an http:// or ws:// server answers a TLS
// handshake instead (asked only after a failed upgrade, to say "use
// https://").
func speaksTLS(server string, timeout time.Duration) bool {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "ws") {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: min(timeout, 5*time.Second)},
		Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe: no data is sent
	c, err := d.Dial("tcp", host)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// handshakeStatus finds the HTTP status and body of a refused upgrade:
// mux's *HandshakeError (tunnel) or the adapters' *UpgradeError (exec,
// port-forward).
func handshakeStatus(err error) (int, []byte, bool) {
	var he *mux.HandshakeError
	if errors.As(err, &he) && he.StatusCode != 0 && he.StatusCode != http.StatusSwitchingProtocols {
		return he.StatusCode, he.Body, true
	}
	var ue *wsmuxhttpstream.UpgradeError
	if errors.As(err, &ue) && ue.StatusCode != 0 && ue.StatusCode != http.StatusSwitchingProtocols {
		return ue.StatusCode, ue.Body, true
	}
	return 0, nil, false
}

// firstLine returns the first non-empty line of a response body, clipped.
func firstLine(b []byte) string {
	for l := range strings.SplitSeq(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = strings.ToValidUTF8(l[:200], "") + "..."
			}
			return l
		}
	}
	return "(no body)"
}
