package netpoll

import (
	"errors"
	"io"
)

// Event is what a readiness notification says about a socket.
type Event uint8

// Events: the socket may have bytes (or an end, or an error) to read; its
// send buffer may have room (or the connection failed).
// Hangup comes with Readable when the peer closed its end or the
// connection failed: read until io.EOF or the error, not only until a
// short read.
const (
	Readable Event = 1 << iota
	Writable
	Hangup
)

// Handler receives a registration's events on the poller's goroutine. It
// must not block nor call the Poller: it records the event and returns the
// Task that handles it, or nil when that Task is queued or running already.
// The poller queues the Tasks of one wake-up on its Pool, or runs a lone
// one itself: a single ready socket is handled with no handoff between
// goroutines.
type Handler interface {
	OnReady(Event) Task
}

// Errors.
var (
	// ErrWouldBlock: the socket has no bytes to read or no room to write
	// now; wait for the next event.
	ErrWouldBlock = errors.New("netpoll: operation would block")
	// ErrUnsupported: the connection cannot be polled (not a plain TCP or
	// Unix socket, or not Linux).
	ErrUnsupported = errors.New("netpoll: connection type not supported by the event loop")
	// ErrClosed: the Poller was closed.
	ErrClosed = errors.New("netpoll: poller closed")
)

var errEOF = io.EOF
