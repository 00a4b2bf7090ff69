package wsio

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gobwas/ws"
)

// ErrCloseSent is returned by WriteMessage once a close frame has been sent
// (by WriteClose or as FlushControl's reply to the peer's close): RFC 6455
// forbids data frames after a close frame.
var ErrCloseSent = errors.New("wsio: close frame already sent")

// ProtocolError reports a violation of RFC 6455 or of the WSMUX/1 WebSocket
// mapping by the peer. Close is the WebSocket status code to send in the
// close frame that ends the connection (1002 protocol error, 1003 text frame,
// 1009 message too big).
type ProtocolError struct {
	Close  ws.StatusCode
	Reason string
}

// Error implements error.
func (e *ProtocolError) Error() string {
	return "wsio: protocol error (close " + strconv.Itoa(int(e.Close)) + "): " + e.Reason
}

// CloseError reports that the peer sent a close frame. Code is the peer's
// status code, ws.StatusNoStatusRcvd (1005) when its close frame carried
// none; Reason is its reason text.
type CloseError struct {
	Code   ws.StatusCode
	Reason string
}

// Error implements error.
func (e *CloseError) Error() string {
	s := "wsio: peer closed the connection (" + strconv.Itoa(int(e.Code)) + ")"
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// HandshakeError reports a failed WebSocket handshake.
//
// On the client (Dial): StatusCode is the server's HTTP status; for a status
// other than 101 Header and Body (at most MaxHandshakeBody bytes) are the
// server's response, for a 101 that did not select wsmux.v1 Reason says so.
// On the server (Upgrade): StatusCode is the HTTP status answered to the
// client and Reason why.
type HandshakeError struct {
	StatusCode int
	Header     http.Header
	Body       []byte
	Reason     string
}

// Error implements error.
func (e *HandshakeError) Error() string {
	s := "wsio: websocket handshake failed: " + strconv.Itoa(e.StatusCode)
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
