package engine

import (
	"errors"
	"os"

	"github.com/wsmux/wsmux/frame"
)

// Errors returned by Session and Stream methods (package mux re-exports
// them).
var (
	// ErrSessionClosed reports an operation on a session that has ended.
	// Every *SessionError matches it with errors.Is.
	ErrSessionClosed = errors.New("mux: session closed")
	// ErrStreamClosed reports a Write after CloseWrite (or Close), or a
	// Read after CloseRead.
	ErrStreamClosed = errors.New("mux: stream closed")
	// ErrGoAway reports an Open refused because a GOAWAY was sent or
	// received: the session takes no new streams.
	ErrGoAway = errors.New("mux: session is going away")
	// ErrTimeout is returned when a deadline, OpenTimeout or another
	// session timer expires. It satisfies net.Error with Timeout() true and
	// matches os.ErrDeadlineExceeded with errors.Is.
	ErrTimeout error = timeoutError{}
)

// timeoutError is the net.Error of expired deadlines.
type timeoutError struct{}

func (timeoutError) Error() string   { return "mux: i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded
}

// StreamError ends one stream: a RST_STREAM (or a refused open, or a
// STOP_SENDING) with Code. Remote tells whether the peer sent it. Stop
// marks the peer's STOP_SENDING: only our sending ended (Write fails with
// it), and the peer's direction goes on (Read still works).
type StreamError struct {
	Code   frame.ErrorCode
	Remote bool
	Reason string
	Stop   bool
}

// Error implements error.
func (e *StreamError) Error() string {
	s := "mux: stream reset"
	if e.Stop {
		s = "mux: stream stopped (STOP_SENDING)"
	}
	if e.Remote {
		s += " by peer"
	}
	s += ": " + e.Code.String()
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// SessionError ends a whole session. Code is the GOAWAY code sent (Remote
// false) or received (Remote true); Err, when set, is the underlying cause
// (a *frame.Error, a transport error, a WebSocket close...). A connection
// that fails under the session, with no GOAWAY before it, gives
// INTERNAL_ERROR and a message that says the connection failed. Every
// SessionError matches ErrSessionClosed with errors.Is.
type SessionError struct {
	Code   frame.ErrorCode
	Remote bool
	Err    error
	// lost: the connection failed under the session (a read error, no
	// GOAWAY before it): neither side sent Code, and the peer may not
	// have closed anything.
	lost bool
}

// Error implements error.
func (e *SessionError) Error() string {
	s := "mux: session closed"
	switch {
	case e.lost:
		s += ": the connection failed"
	case e.Remote:
		s += " by peer"
	}
	s += ": " + e.Code.String()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *SessionError) Unwrap() error { return e.Err }

// Is makes every SessionError match ErrSessionClosed.
func (e *SessionError) Is(target error) bool { return target == ErrSessionClosed }

// Graceful reports whether err ended the session without a fault: a GOAWAY
// or close with NO_ERROR from the peer, or a clean end of the transport
// after one.
func Graceful(err *SessionError) bool {
	return err != nil && err.Remote && err.Code == frame.NoError
}
