package mux

import (
	"errors"

	"github.com/wsmux/wsmux/mux/internal/engine"
)

// Errors returned by Session and Stream methods.
var (
	// ErrSessionClosed reports an operation on a session that has ended.
	// Every *SessionError matches it with errors.Is.
	ErrSessionClosed = engine.ErrSessionClosed
	// ErrStreamClosed reports a Write after CloseWrite (or Close), or a
	// Read after CloseRead.
	ErrStreamClosed = engine.ErrStreamClosed
	// ErrGoAway reports an Open refused because a GOAWAY was sent or
	// received: the session takes no new streams.
	ErrGoAway = engine.ErrGoAway
	// ErrTimeout is returned when a deadline, OpenTimeout or another
	// session timer expires. It satisfies net.Error with Timeout() true and
	// matches os.ErrDeadlineExceeded with errors.Is.
	ErrTimeout = engine.ErrTimeout
	// ErrGoAwayCode reports a GoAway with a code other than NO_ERROR: a
	// graceful shutdown's GOAWAY carries NO_ERROR (spec 9.4), and a GOAWAY
	// with another code would end the session at once on the peer's side.
	// Use GoAway(frame.NoError) to drain, or Close.
	ErrGoAwayCode = errors.New("mux: a graceful GOAWAY carries NO_ERROR: use GoAway(frame.NoError) to drain, or Close")
)

// StreamError ends one stream: a RST_STREAM (or a refused open, or a
// STOP_SENDING) with Code. Remote tells whether the peer sent it; Stop,
// that it is the peer's STOP_SENDING, which ends only our sending (Write
// fails with it) while the peer's direction goes on.
type StreamError = engine.StreamError

// SessionError ends a whole session. Code is the GOAWAY code sent (Remote
// false) or received (Remote true); Err, when set, is the underlying cause
// (a *frame.Error, a transport error, a WebSocket close...). A connection
// that fails under the session, with no GOAWAY before it, gives
// INTERNAL_ERROR and a message that says the connection failed. Every
// SessionError matches ErrSessionClosed with errors.Is.
type SessionError = engine.SessionError
