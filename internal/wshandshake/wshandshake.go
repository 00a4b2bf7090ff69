package wshandshake

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Subprotocol is the WebSocket subprotocol of WSMUX/1: the client offers it
// in Sec-WebSocket-Protocol, the server must select it.
const Subprotocol = "wsmux.v1"

// DefaultHandshakeTimeout bounds a handshake (connect, TLS and HTTP upgrade
// on the client; writing the 101 on the server) when no other timeout is
// given.
const DefaultHandshakeTimeout = 10 * time.Second

// MaxHandshakeBody is how much of a refused handshake's response body Dial
// keeps in HandshakeError.Body.
const MaxHandshakeBody = 64 << 10

// acceptGUID is RFC 6455's magic string (section 1.3).
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// AcceptKey computes Sec-WebSocket-Accept for a Sec-WebSocket-Key.
func AcceptKey(key string) string {
	sum := sha1.Sum([]byte(key + acceptGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// NewKey returns a random Sec-WebSocket-Key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.StdEncoding.EncodeToString(b[:])
}

// headerContains reports whether a comma-separated header lists token
// (case-insensitively) on any of its lines.
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

// HandshakeError reports a failed WebSocket handshake.
//
// On the client (Dial, CheckResponse): StatusCode is the server's HTTP
// status; for a status other than 101, Header and Body (at most
// MaxHandshakeBody bytes) are the server's response; for a 101 that is not a
// valid wsmux.v1 answer (no or another subprotocol, a wrong
// Sec-WebSocket-Accept...) Header is the response's and Reason says what is
// wrong. On the server (Upgrade): StatusCode is the HTTP status answered to
// the client and Reason why.
type HandshakeError struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	Reason     string
}

// Error implements error.
func (e *HandshakeError) Error() string {
	s := "wsmux: websocket handshake failed: " + strconv.Itoa(e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		s += " " + t
	}
	switch {
	case e.Reason != "":
		s += ": " + e.Reason
	case len(e.Body) > 0:
		b := e.Body
		if len(b) > 256 {
			b = b[:256]
		}
		s += ": " + string(b)
	}
	return s
}
