package wsio

import (
	"errors"
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
