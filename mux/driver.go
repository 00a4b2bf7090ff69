package mux

import (
	"bufio"
	"net"
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

// driver is what a Session runs on: it moves bytes between the connection
// and the engine, and wakes whatever waits for them. Three implement it:
// goDriver (DriverGoroutines, driver_goroutines.go: the reference),
// fastDriver (DriverFastPaths, driver_fastpaths*.go: goDriver plus direct
// writes and leader reads) and evConn (DriverEventLoop,
// driver_eventloop*.go). Every driver calls the engine only behind the
// seam (seam.go). Methods marked (s.mu held) are called with the
// session's lock held.
type driver interface {
	// wake says the engine has something to send (EvSend; s.mu held or
	// not).
	wake()
	// kick gets the bytes a Write of n bytes on st queued moving (s.mu
	// held; it releases it).
	kick(st *Stream, n int)
	// suspended says the session suspended: its connection is lost
	// (Session.lost; s.mu held).
	suspended()
	// attach installs conn, the connection a resume brought, and br, the
	// reader of its handshake (s.mu and sendMu held); resumed then
	// starts using it (s.mu not held).
	attach(conn net.Conn, br *bufio.Reader)
	resumed()
	// connClosed says Close closed the connection under the driver after
	// Config.CloseTimeout.
	connClosed()

	// The read token (driver_fastpaths_lead.go): the fast paths let a
	// waiting Read read the socket itself; the other drivers do nothing
	// here (noLead).

	// reclaim is called before a goroutine waits for something only the
	// socket can bring (s.mu held).
	reclaim()
	// readable says st has something for its Read (s.mu held).
	readable(st *Stream)
	// leadWoke is called when a Read of st whose buffer was lent wakes
	// from its wait; it reports whether that Read holds the token (s.mu
	// held). leadWait does the same for a Read that read the socket.
	leadWoke(st *Stream) bool
	// leadWait is called by a Read of st about to wait with its buffer
	// lent; lead: it holds the token. It returns whether it holds it
	// now, and again: it read a message (or was interrupted) and looks
	// at its stream again instead of waiting (s.mu held, released
	// meanwhile).
	leadWait(st *Stream, lead bool) (leads, again bool)
	// endLead is called when the Read of st that holds the token returns;
	// keep: it returns data and nothing more is buffered (s.mu held).
	endLead(st *Stream, keep bool)
}

// noLead is the read side of drivers without leader reads.
type noLead struct{}

func (noLead) reclaim()                                   {}
func (noLead) readable(*Stream)                           {}
func (noLead) leadWoke(*Stream) bool                      { return false }
func (noLead) leadWait(_ *Stream, lead bool) (bool, bool) { return lead, false }
func (noLead) endLead(*Stream, bool)                      {}

// driverFor returns the driver that runs a session d selects over conn:
// the event loop only serves connections it can poll, and falls back to
// the fast paths.
func driverFor(d Driver, conn net.Conn) Driver {
	switch d = d.resolve(); {
	case d == DriverEventLoop && !eventLoopFits(conn):
		return DriverFastPaths
	}
	return d
}

// startDriver starts the driver kind (driverFor) for s over conn; br's
// buffered bytes are read first.
func (s *Session) startDriver(kind Driver, conn net.Conn, br *bufio.Reader) {
	switch kind {
	case DriverEventLoop:
		if s.startEventLoop(conn, br) == nil {
			return
		}
		// The poller refused conn: the reference driver runs it.
		fallthrough
	case DriverGoroutines:
		d := newGoDriver(s, conn, br)
		s.drv = d // before its goroutines read it
		d.start()
	case DriverFastPaths:
		d := newFastDriver(s, conn, br)
		s.drv = d
		d.start()
	}
}
