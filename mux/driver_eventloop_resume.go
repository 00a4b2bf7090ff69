package mux

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/wsmux/wsmux/mux/internal/netpoll"
)

// Resumption on the event loop (Config.Resume with DriverEventLoop). When
// the connection fails, the worker suspends the session (Session.lost, as
// the goroutine drivers' reader and writer do) and leaves the connection:
// the registration is removed, a half-written batch dropped (the engine
// retained it and replays it first), the parser reset and readerDone
// closed, which tells the resume under way that our received count is
// final. A suspended session holds no registration and no goroutine; its
// timer runs the resume timeout. attach hands the new connection over in
// evConn.next and wakes the session; whichever goroutine runs its next
// turn registers the connection and goes on reading and writing there.

// evNext is a connection a resume brought, with the bytes the handshake's
// reader had buffered past the 101.
type evNext struct {
	conn net.Conn
	pre  *[]byte
}

// tick runs the engine's timers (s.mu held) and reports whether they
// found the connection lost and the session suspended.
func (c *evConn) tick(now time.Duration) bool {
	s, e := c.s, c.s.e
	e.SetPartial(c.partialSince, c.wasPartial)
	e.Tick(now)
	if lost, err := e.TakeConnLost(); lost {
		if s.lost(now, err) {
			return true
		}
		e.FailConnLost()
	}
	return false
}

// suspendOn suspends the session after its connection failed with err,
// when it may resume, and leaves the connection; it reports whether it
// did. The peer's close and WebSocket violations end the session instead.
func (c *evConn) suspendOn(err error) bool {
	s := c.s
	if s.res == nil || isPeerEnd(err) {
		return false
	}
	s.mu.Lock()
	ok := s.lost(s.now(), err)
	s.unlock()
	if ok {
		c.detach()
	}
	return ok
}

// leaveIfSuspended leaves the connection when another goroutine suspended
// the session (a server that learned of the drop from the client's
// resume); lost closed the connection already.
func (c *evConn) leaveIfSuspended() {
	s := c.s
	s.mu.Lock()
	susp := s.e.Suspended()
	s.unlock()
	if susp {
		c.detach()
	}
}

// detach leaves the lost connection (its worker, once).
func (c *evConn) detach() {
	if c.detached {
		return
	}
	c.detached = true
	c.reg.Remove()
	c.releaseOut()
	c.pongDue, c.closeReply = false, false
	c.putCtl()
	c.parser.Release()
	c.pre = nil
	c.readDone = true // the read loops stop here
	c.hup, c.blocked, c.wasPartial = false, false, false
	c.closeReader()
}

// closeReader closes readerDone, once per connection (only the worker
// closes it): nothing reads the old connection any more, so the received
// count is final.
func (c *evConn) closeReader() {
	s := c.s
	if s.res == nil {
		return
	}
	s.mu.Lock()
	done := s.readerDone
	s.unlock()
	if !isClosed(done) {
		close(done)
	}
}

// reattach registers the connection a resume brought, if one came, and
// reports whether the session runs on it now.
func (c *evConn) reattach() bool {
	s := c.s
	s.mu.Lock()
	nx := c.next
	c.next = nil
	s.unlock()
	if nx == nil {
		return false
	}
	c.parser.Init(c.client, s.cfg.MaxMessageSize) // detach reset the rest
	c.readDone, c.detached, c.pre = false, false, nx.pre
	if err := evLoop.poller.Add(&c.reg, nx.conn, c); err != nil {
		_ = nx.conn.Close()
		if errors.Is(err, netpoll.ErrUnsupported) {
			// Every resume would bring the same kind: end now rather
			// than suspend again until the resume timeout.
			err = fmt.Errorf("%w (%T)", errResumeNotPollable, nx.conn)
			s.mu.Lock()
			s.e.ReadFailed(err)
			s.unlock()
			c.readDone, c.detached = true, true
			return false // whileSuspended finds the session ended and finishes
		}
		c.readEnd(err) // suspends again, or ends the session
		return !c.detached
	}
	return true
}

// errResumeNotPollable ends an event-loop session whose resume brought a
// connection the poller cannot serve (TLS terminated in this process, a
// wrapper) while the first one was a plain socket.
var errResumeNotPollable = errors.New("mux: the connection a resume brought cannot run on the event loop (it needs a plain TCP or Unix socket, as the session's first one was); start the session with DriverFastPaths")

// whileSuspended runs the engine's timers of a suspended session (the
// resume timeout) and ends the driver when the session ended meanwhile:
// a timeout, a refusal, Close.
func (c *evConn) whileSuspended() {
	s, e := c.s, c.s.e
	s.mu.Lock()
	now := s.now()
	e.Tick(now)
	dead := e.Err() != nil
	wait := e.NextTimer(now)
	s.unlock()
	if dead {
		c.finish()
		return
	}
	c.armTimer(wait)
}
