package mux

import (
	"os"
	"sync"
)

// Driver selects how a Session moves bytes between its connection and its
// streams. Every driver runs the same protocol engine (the session state
// machine) behind the same seam: the engine is called only under the
// session's lock, and its events are dispatched before the lock is
// released. They differ in which goroutines call it.
type Driver uint8

const (
	// DriverDefault is DriverFastPaths unless the WSMUX_DRIVER
	// environment variable names another driver.
	DriverDefault Driver = iota
	// DriverFastPaths is DriverGoroutines plus three fast paths, each
	// used where the connection allows it: a Read that waits reads the
	// connection itself (leader reads, on TCP and Unix sockets and TLS
	// over them: no goroutine handoff between the socket and the
	// application); a Write of at most 4 KiB that finds the writer
	// goroutine parked writes its own batch; DATA goes out from its send
	// chunks with one writev instead of being copied into the batch (TCP
	// and Unix sockets).
	DriverFastPaths
	// DriverGoroutines is the reference driver: one reader goroutine
	// feeds every received message to the engine, one writer goroutine
	// writes every batch and runs the timers; nothing else touches the
	// connection.
	DriverGoroutines
	// DriverEventLoop runs sessions without goroutines of their own: the
	// connection is registered with one epoll instance for the process, a
	// bounded pool of worker goroutines reads, feeds the engine and
	// writes batches only while a session has bytes to move, and one
	// timer wheel runs every session's timers. An idle session holds no
	// goroutine and no read or write buffer. Streams are unchanged: their
	// Reads and Writes block the application's goroutines as with the
	// other drivers. It serves plain TCP and Unix sockets on Linux; other
	// connections (TLS, whose crypto/tls buffers decrypted bytes the
	// poller cannot see; pipes; wrappers) and other systems get
	// DriverFastPaths. A resumable session (Config.Resume) moves its
	// registration to the connection each resume brings.
	DriverEventLoop
)

// String returns the driver's name as WSMUX_DRIVER spells it.
func (d Driver) String() string {
	switch d {
	case DriverDefault:
		return "default"
	case DriverFastPaths:
		return "fastpaths"
	case DriverGoroutines:
		return "goroutines"
	case DriverEventLoop:
		return "eventloop"
	}
	return "unknown"
}

// envDriver is the driver WSMUX_DRIVER names (DriverFastPaths when unset
// or unknown).
var envDriver = sync.OnceValue(func() Driver {
	switch os.Getenv("WSMUX_DRIVER") {
	case DriverGoroutines.String():
		return DriverGoroutines
	case DriverEventLoop.String():
		return DriverEventLoop
	}
	return DriverFastPaths
})

// resolve returns the driver d stands for.
func (d Driver) resolve() Driver {
	if d == DriverDefault {
		return envDriver()
	}
	return d
}
