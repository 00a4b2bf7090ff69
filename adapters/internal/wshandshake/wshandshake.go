// Package wshandshake holds the RFC 6455 opening handshake pieces the
// adapters need and the mux API does not expose: the client side split into
// "prepare the request" and "check the response" (an http.RoundTripper must
// return the 101 *http.Response itself, with its headers, to client-go), and
// a server side that writes the ResponseWriter's headers (where
// httpstream.Handshake put X-Stream-Protocol-Version) into the 101.
//
// Only the standard library is used; the WebSocket framing after the
// handshake is mux's.
package wshandshake

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Subprotocol is WSMUX/1's WebSocket subprotocol (mux.Subprotocol).
const Subprotocol = "wsmux.v1"

const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey computes Sec-WebSocket-Accept for a Sec-WebSocket-Key.
func AcceptKey(key string) string {
	h := sha1.New()
	h.Write([]byte(key))
	h.Write([]byte(acceptGUID))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// NewKey returns a random Sec-WebSocket-Key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// PrepareRequest turns req (cloned by the caller) into a WebSocket upgrade
// offering wsmux.v1 and returns the key to check the answer with. The method
// becomes GET: RFC 6455 requires it, and WebSocket proxies pass nothing else
// (kubectl's SPDY requests are POSTs).
func PrepareRequest(req *http.Request) (key string) {
	key = NewKey()
	req.Method = http.MethodGet
	h := req.Header
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "websocket")
	h.Set("Sec-WebSocket-Version", "13")
	h.Set("Sec-WebSocket-Key", key)
	h.Set("Sec-WebSocket-Protocol", Subprotocol)
	h.Del("Sec-WebSocket-Extensions") // no permessage-deflate
	return key
}

// CheckResponse validates a 101 answer to a request prepared with key.
func CheckResponse(resp *http.Response, key string) error {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("status %d, want 101", resp.StatusCode)
	}
	if !headerContains(resp.Header, "Connection", "upgrade") {
		return errors.New("response lacks Connection: Upgrade")
	}
	if !headerContains(resp.Header, "Upgrade", "websocket") {
		return errors.New("response lacks Upgrade: websocket")
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != AcceptKey(key) {
		return fmt.Errorf("bad Sec-WebSocket-Accept %q", got)
	}
	if p := strings.TrimSpace(resp.Header.Get("Sec-WebSocket-Protocol")); p != Subprotocol {
		return fmt.Errorf("server selected subprotocol %q, want %q", p, Subprotocol)
	}
	if resp.Header.Get("Sec-WebSocket-Extensions") != "" {
		return errors.New("server selected WebSocket extensions; none were offered")
	}
	return nil
}

func headerContains(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), token) {
				return true
			}
		}
	}
	return false
}

// IsRequest reports whether req is a WebSocket upgrade offering wsmux.v1.
func IsRequest(req *http.Request) bool {
	return headerContains(req.Header, "Upgrade", "websocket") && headerContains(req.Header, "Sec-WebSocket-Protocol", Subprotocol)
}

// RequestError is a rejected upgrade request: the status answered.
type RequestError struct {
	Status int
	Reason string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("wsmux upgrade rejected (%d): %s", e.Status, e.Reason)
}

// CheckRequest validates a server-side upgrade request and returns its key.
func CheckRequest(req *http.Request) (string, *RequestError) {
	switch {
	case req.Method != http.MethodGet && req.Method != http.MethodPost:
		// POST is tolerated for callers that kept kubectl's SPDY method.
		return "", &RequestError{http.StatusMethodNotAllowed, "method " + req.Method}
	case !headerContains(req.Header, "Connection", "upgrade") || !headerContains(req.Header, "Upgrade", "websocket"):
		return "", &RequestError{http.StatusBadRequest, "missing WebSocket upgrade headers"}
	case req.Header.Get("Sec-WebSocket-Version") != "13":
		return "", &RequestError{http.StatusUpgradeRequired, "Sec-WebSocket-Version must be 13"}
	case !headerContains(req.Header, "Sec-WebSocket-Protocol", Subprotocol):
		return "", &RequestError{http.StatusBadRequest, "client did not offer WebSocket subprotocol " + Subprotocol}
	}
	key := req.Header.Get("Sec-WebSocket-Key")
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return "", &RequestError{http.StatusBadRequest, "bad Sec-WebSocket-Key"}
	}
	return key, nil
}

// Upgrade checks req, hijacks w and writes the 101 answer including every
// header already set on w.Header() (X-Stream-Protocol-Version from
// httpstream.Handshake). A bad request is answered with an HTTP error and
// returned as a *RequestError. The returned reader holds any bytes the
// client sent past the handshake.
func Upgrade(w http.ResponseWriter, req *http.Request) (net.Conn, *bufio.Reader, error) {
	key, rerr := CheckRequest(req)
	if rerr != nil {
		if rerr.Status == http.StatusUpgradeRequired {
			w.Header().Set("Sec-WebSocket-Version", "13")
		}
		http.Error(w, rerr.Reason, rerr.Status)
		return nil, nil, rerr
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "unable to upgrade: unable to hijack response", http.StatusInternalServerError)
		return nil, nil, errors.New("response writer cannot be hijacked")
	}
	extra := w.Header().Clone()
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	var b strings.Builder
	b.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	b.WriteString("Upgrade: websocket\r\nConnection: Upgrade\r\n")
	b.WriteString("Sec-WebSocket-Accept: " + AcceptKey(key) + "\r\n")
	b.WriteString("Sec-WebSocket-Protocol: " + Subprotocol + "\r\n")
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions", "Content-Length", "Transfer-Encoding", "Content-Type"} {
		extra.Del(k)
	}
	for k, vs := range extra {
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				continue
			}
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, werr := rw.Writer.WriteString(b.String())
	if werr == nil {
		werr = rw.Writer.Flush()
	}
	if werr != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("writing the 101: %w", werr)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, rw.Reader, nil
}
