// Package netpoll is the event loop under mux's DriverEventLoop: readiness
// of many sockets from one epoll instance (Poller, Linux only), a bounded
// pool of worker goroutines that exist only while there is work (Pool), and
// one timer wheel for every session's timers (Wheel).
//
// Nothing here keeps a goroutine per connection: a Poller runs one
// goroutine while it has registrations, a Wheel one while it has timers, a
// Pool at most its bound while tasks are queued. Each exits when its work
// runs out, so a process with no sessions runs none of them.
//
// Reads and writes go through the connection's syscall.RawConn, so they
// never race with a Close of the connection by another goroutine, and are
// non-blocking: ErrWouldBlock says to wait for the next readiness event.
//
// It knows nothing of WebSocket or WSMUX/1. It must not import package mux
// or its other internal packages.
package netpoll
