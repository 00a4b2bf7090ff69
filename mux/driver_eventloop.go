package mux

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/netpoll"
	"github.com/wsmux/wsmux/mux/internal/wsio"
	"github.com/wsmux/wsmux/mux/internal/wsnb"
)

// The event-loop driver (DriverEventLoop): the same engine behind the same
// seam, but no goroutine of its own per session. The connection is
// registered with one process-wide epoll instance; its readiness, the
// engine's EvSend and the session's timer (one entry in a process-wide
// timer wheel) each mark the session runnable, and a bounded pool of worker
// goroutines runs it (evConn.Run): read what the socket has into the
// non-blocking WebSocket parser and feed whole messages to the engine,
// then lay out and write batches until the socket is full or nothing is
// left, then set the session's timer. A partial frame stays in the parser
// and a half-written batch stays in evConn until the next readiness event:
// neither holds a worker. Between bursts the session holds no goroutine,
// no read buffer and no write buffer.
//
// Everything evConn keeps beside the engine belongs to the one worker that
// runs it (the queued bit of evConn.flags makes sure there is one); the
// engine is still called only with Session.mu held, so the application's
// Reads and Writes work as with the other drivers.

// Bits of evConn.flags.
const (
	evQueued uint32 = 1 << iota // queued on the pool or running
	evRead                      // the socket may have bytes
	evWrite                     // the socket may take bytes
	evWake                      // the engine has something to send (EvSend)
	evTimer                     // the session's timer fired
	evKill                      // Close closed the connection
	evHup                       // the peer closed its end or the connection failed
	evLost                      // the session suspended (driver_eventloop_resume.go)
)

// Budgets of one run, after which a busy session goes to the back of the
// pool's queue so that others get their turn.
const (
	evReadBudget  = 256 << 10
	evWriteBudget = 4 // batches
	evReadBuffer  = 64 << 10
	evDirectRead  = 16 << 10 // payload left at which reads go straight into the message buffer
)

// evTick and evSlots shape the timer wheel: timers fire up to evTick late.
const (
	evTick  = 4 * time.Millisecond
	evSlots = 2048
)

// eventLoop is the process-wide poller, worker pool and timer wheel.
type eventLoop struct {
	poller *netpoll.Poller
	pool   *netpoll.Pool
	wheel  *netpoll.Wheel
}

// defaultLoop is made by the first event-loop session; its goroutines run
// only while sessions are registered, busy or have timers set.
var defaultLoop = sync.OnceValues(func() (*eventLoop, error) {
	pool := netpoll.NewPool(max(2*runtime.GOMAXPROCS(0), 4))
	p, err := netpoll.New(pool)
	if err != nil {
		return nil, err
	}
	evLoop = &eventLoop{
		poller: p,
		pool:   pool,
		wheel:  netpoll.NewWheel(evTick, evSlots),
	}
	return evLoop, nil
})

// evLoop is defaultLoop's loop once made (sessions reach it through here
// rather than a pointer each).
var evLoop *eventLoop

// eventLoopFits reports whether conn can be served by the event loop: a
// plain TCP or Unix socket on Linux. Other connections (TLS, whose
// crypto/tls buffers bytes the poller cannot see; pipes; wrappers) use
// DriverFastPaths.
func eventLoopFits(conn net.Conn) bool { return netpoll.Supported(conn) }

// readBuffers are the event loop's read buffers, held only during a run.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, evReadBuffer); return &b }}

// evConn is the event loop's state of one session.
type evConn struct {
	noLead // no leader reads: workers read the socket
	s      *Session
	reg    netpoll.Registration
	timer  netpoll.Timer
	flags  atomic.Uint32

	// Owned by the running worker. (The flags are together: an idle
	// session holds this struct, and its size class is what counts.)
	closeEcho    ws.StatusCode
	client       bool // we mask what we send
	started      bool // the preface was sent
	wasPartial   bool
	readDone     bool // EOF, a read error, or the peer's close came
	outBatch     bool // out is a batch: count it and confirm its ACKs when written
	blocked      bool
	closeReply   bool // the peer's close is to be answered
	closeSent    bool
	lingering    bool
	writeFailed  bool
	finished     bool
	hup          bool  // evHup came: read until EOF or an error, not only until a short read
	fedSmall     bool  // this turn fed the engine a small message (see Run)
	detached     bool  // suspended: no connection registered (driver_eventloop_resume.go)
	pongDue      bool  // a ping's payload waits in cb.pong to be answered
	pongLen      uint8 // its length
	parser       wsnb.Parser
	pre          *[]byte       // bytes the handshake's reader had buffered
	partialSince time.Duration // when the partial message started
	out          []byte
	outBuf       *[]byte // pooled buffer out is in (nil: ctl)
	blockedSince time.Duration
	outLen       int    // payload bytes of the batch in out
	cb           *evCtl // control frames' buffers, held only while one is due or being written
	vec          *evVec // the pieces of a batch with spliced DATA still to write (instead of out)
	lingerBy     time.Duration
	next         *evNext // s.mu: the connection a resume brought, for the worker to take
}

// evCtl holds the control frames (pong, close) a session writes, taken
// from a pool when one is due: most sessions never need one between
// bursts.
type evCtl struct {
	out     [2 * (wsio.HeaderRoom + ws.MaxControlFramePayloadSize)]byte // frames being written
	scratch [wsio.HeaderRoom + ws.MaxControlFramePayloadSize]byte       // one frame being laid out
	pong    [ws.MaxControlFramePayloadSize]byte
}

var evCtls = sync.Pool{New: func() any { return new(evCtl) }}

// evVec holds the pieces of a batch whose DATA runs stay in their send
// chunks (the engine's Spliced): one writev sends them, no copy into the
// batch. Pooled, held only while such a batch is being written.
type evVec struct {
	all [][]byte // the pieces
	v   [][]byte // those not yet written (a tail of all)
}

var evVecs = sync.Pool{New: func() any { return new(evVec) }}

func (c *evConn) ctlBuf() *evCtl {
	if c.cb == nil {
		c.cb = evCtls.Get().(*evCtl)
	}
	return c.cb
}

// putCtl gives the control buffers back once nothing in them is due.
func (c *evConn) putCtl() {
	if c.cb != nil && !c.pongDue && !c.closeReply && (c.out == nil || c.outBatch) {
		evCtls.Put(c.cb)
		c.cb = nil
	}
}

// startEventLoop registers the session's connection conn with the event
// loop (NewSession, for DriverEventLoop). br's buffered bytes are read
// first.
func (s *Session) startEventLoop(conn net.Conn, br *bufio.Reader) error {
	loop, err := defaultLoop()
	if err != nil {
		return err
	}
	c := &evConn{s: s, client: s.client}
	c.parser.Init(s.client, s.cfg.MaxMessageSize)
	c.pre = handshakeBytes(br)
	c.timer.Init(loop.wheel, c.onTimer)
	s.drv = c
	if s.res != nil {
		// Closed when the worker leaves conn. Set before the
		// registration: a worker may run the session at once (a
		// connection that fails right after the 101 ends it there).
		s.readerDone = make(chan struct{})
	}
	if err := loop.poller.Add(&c.reg, conn, c); err != nil {
		s.drv = nil // startDriver falls back to a goroutine driver; nothing ran
		return err
	}
	c.signal(evRead | evWake)
	return nil
}

// OnReady records the socket's readiness (the poller's goroutine) and
// returns the session as the Task to run unless it is queued already.
func (c *evConn) OnReady(e netpoll.Event) netpoll.Task {
	var bits uint32
	if e&netpoll.Readable != 0 {
		bits |= evRead
	}
	if e&netpoll.Writable != 0 {
		bits |= evWrite
	}
	if e&netpoll.Hangup != 0 {
		bits |= evHup
	}
	if c.flags.Or(bits|evQueued)&evQueued == 0 {
		return c
	}
	return nil
}

func (c *evConn) onTimer() { c.signal(evTimer) }

// signal marks work and queues the session unless it is queued already.
func (c *evConn) signal(bits uint32) {
	if c.flags.Or(bits|evQueued)&evQueued == 0 {
		evLoop.pool.Submit(c)
	}
}

// kick gets queued bytes moving after a Write (s.mu held; it releases it).
// A Write to a session no worker holds runs the session's turn on the
// calling goroutine: the batch goes out with no handoff to a worker (as
// the goroutine drivers' direct writes), which is most of an echo's cost
// on the loop and a good part of a bulk transfer's. The turn's writes never
// block (a full socket waits for the poller), so its size does not matter.
func (c *evConn) kick(*Stream, int) {
	s := c.s
	if !c.flags.CompareAndSwap(0, evQueued|evWake) {
		c.signal(evWake)
		s.unlock()
		return
	}
	s.unlock()
	c.Run()
}

// Run is one turn of the session on a worker.
func (c *evConn) Run() {
	for range 4 {
		bits := c.flags.Swap(evQueued) &^ evQueued
		redo := c.step(bits)
		if redo != 0 {
			c.flags.Or(redo)
			evLoop.pool.Submit(c) // still queued: to the back, for fairness
			return
		}
		yield := c.fedSmall
		c.fedSmall = false
		if c.flags.CompareAndSwap(evQueued, 0) {
			if yield {
				// A small message most likely woke a Read waiting for it:
				// let that goroutine run here now (it is next on this P),
				// before this one goes back to polling. Its reply then
				// finds the session free and goes out at once, on a warm
				// P, instead of after a system call here or on another P
				// that stole it.
				runtime.Gosched()
			}
			return
		}
		// Something came while it ran: go on.
	}
	evLoop.pool.Submit(c)
}

// step handles what bits say and returns the bits of work left for the
// next turn (a budget ran out).
func (c *evConn) step(bits uint32) uint32 {
	if c.finished {
		return 0
	}
	if bits&evKill != 0 {
		c.finish()
		return 0
	}
	if bits&evLost != 0 && !c.detached {
		c.leaveIfSuspended() // another goroutine suspended the session
	}
	if c.detached {
		if !c.reattach() {
			c.whileSuspended()
			return 0
		}
		bits |= evRead // edge-triggered: what came before the registration counts
	}
	var redo uint32
	if bits&evHup != 0 {
		c.hup = true
	}
	if bits&evRead != 0 || c.pre != nil {
		redo |= c.read()
	}
	if !c.finished && !c.detached {
		redo |= c.write()
	}
	if !c.finished && !c.detached {
		c.setTimer()
	}
	if c.detached && !c.finished {
		c.whileSuspended()
	}
	return redo
}

// read reads what the socket has, up to the budget, into the parser.
func (c *evConn) read() uint32 {
	if c.pre != nil {
		pre := *c.pre
		c.pre = nil
		c.consume(pre)
	}
	if c.readDone {
		return 0
	}
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	total := 0
	for !c.readDone {
		if total >= evReadBudget {
			return evRead
		}
		var n, want int
		var err error
		if dst := c.parser.PayloadBuffer(); len(dst) >= evDirectRead {
			// The rest of a large payload: straight into the message
			// buffer, no copy through buf.
			want = len(dst)
			n, err = c.reg.Read(dst)
			if n > 0 {
				c.parser.PayloadRead(n)
				c.consume(nil)
			}
		} else {
			want = len(buf)
			n, err = c.reg.Read(buf)
			if n > 0 {
				c.consume(buf[:n])
			}
		}
		total += n
		if err != nil {
			if errors.Is(err, netpoll.ErrWouldBlock) {
				c.parser.Idle() // drained: no message buffer between bursts
			} else if !c.readDone {
				c.readEnd(err)
			}
			break
		}
		if n < want && !c.hup {
			// A short read emptied the socket: bytes that come later are
			// a new edge, so the read that would say EAGAIN is saved (an
			// end of stream that came with these bytes was a hangup).
			c.parser.Idle()
			break
		}
	}
	return 0
}

// consume parses b and feeds what completes to the engine.
func (c *evConn) consume(b []byte) {
	s := c.s
	locked := false
	for (len(b) > 0 || c.parser.FrameDone()) && !c.readDone {
		n, k, payload, err := c.parser.Next(b)
		b = b[n:]
		switch k {
		case wsnb.Message:
			if !locked {
				s.mu.Lock()
				locked = true
			}
			s.e.Feed(payload, s.now())
			c.fedSmall = c.fedSmall || len(payload) <= yieldMessage
			c.parser.Done()
			if len(payload) > yieldMessage && s.e.HasEvents() {
				// A bulk message woke a Read: let it run and lend its
				// buffer again before the next message is fed, so that
				// one lands in it rather than in the receive queue.
				c.unlockFed()
				locked = false
				runtime.Gosched()
			}
		case wsnb.Ping:
			if !c.closeSent {
				c.pongLen = uint8(copy(c.ctlBuf().pong[:], payload))
				c.pongDue = true
			}
		}
		if err != nil {
			if locked {
				s.unlock()
				locked = false
			}
			c.readEnd(err)
		}
	}
	if locked {
		c.unlockFed()
	}
	if c.detached {
		return // the parser was reset with the connection
	}
	if p := c.parser.Partial(); p && !c.wasPartial {
		c.partialSince = s.now()
		c.wasPartial = true
	} else if !p {
		c.wasPartial = false
	}
}

// unlockFed releases the session after feeding it messages: the first
// message after a resume retires the token the resume used.
func (c *evConn) unlockFed() {
	c.s.unlock()
	c.s.confirmed()
}

// readEnd ends the receive direction after err (EOF, a read error, the
// peer's close or a violation).
func (c *evConn) readEnd(err error) {
	c.readDone = true
	if c.suspendOn(err) {
		return
	}
	if errors.Is(err, io.EOF) && c.parser.Partial() {
		err = io.ErrUnexpectedEOF
	}
	c.wasPartial = false
	var ce *wsio.CloseError
	if errors.As(err, &ce) && !c.closeSent {
		c.closeReply = true
		if ce.Code != ws.StatusNoStatusRcvd {
			c.closeEcho = ce.Code
		}
	}
	s := c.s
	s.mu.Lock()
	s.readFailed(err)
	s.unlock()
}

// setTimer sets the session's timer for the engine's next deadline, a
// parked write's stall bound and the close's linger bound.
func (c *evConn) setTimer() {
	s, e := c.s, c.s.e
	s.mu.Lock()
	now := s.now()
	if (c.blocked || c.lingering) && c.tick(now) { // a timer may have fired with no batch to write
		s.unlock()
		c.detach()
		return
	}
	wait := e.NextTimer(now)
	dead := e.Err() != nil
	closeBy := e.CloseBy()
	s.unlock()
	at := func(d time.Duration) {
		if wait < 0 || d < wait {
			wait = max(d, 0)
		}
	}
	if c.blocked {
		by := c.blockedSince + s.cfg.WriteTimeout
		if dead && closeBy > 0 {
			by = closeBy
		}
		if now >= by {
			if c.lingering {
				c.finish()
			} else {
				c.writeError(frame.StallTimeout, errWriteStalled)
			}
			return
		}
		at(by - now)
	}
	if c.lingering {
		if now >= c.lingerBy {
			c.finish()
			return
		}
		at(c.lingerBy - now)
	}
	c.armTimer(wait)
}

// armTimer sets the session's timer to fire after wait (< 0: never).
func (c *evConn) armTimer(wait time.Duration) {
	if wait < 0 {
		c.timer.Stop()
		return
	}
	c.timer.Reset(wait)
}

// handshakeBytes copies the bytes br (the handshake's reader, or nil) had
// buffered past the 101, for the session to read first; nil when none.
func handshakeBytes(br *bufio.Reader) *[]byte {
	if br == nil || br.Buffered() == 0 {
		return nil
	}
	pre, _ := br.Peek(br.Buffered())
	pre = append([]byte(nil), pre...)
	return &pre
}

// errWriteStalled is the error of a write that made no progress for
// Config.WriteTimeout (the goroutine drivers see os.ErrDeadlineExceeded).
var errWriteStalled = errors.New("mux: no write progress for the write timeout (the peer does not read)")

// finish closes the connection and ends the session's driver.
func (c *evConn) finish() {
	if c.finished {
		return
	}
	c.finished = true
	s := c.s
	c.timer.Stop()
	c.reg.Remove()
	_ = s.conn.Close()
	c.releaseOut()
	c.pongDue, c.closeReply = false, false
	c.putCtl()
	c.parser.Release()
	s.mu.Lock()
	if s.e.Err() == nil {
		s.e.ReadFailed(net.ErrClosed)
	}
	s.unlock()
	c.closeReader()
	s.unregister()
	close(s.done)
}

// The driver's side of the session (driver.go).

func (c *evConn) wake() { c.signal(evWake) }

// suspended: the worker leaves the connection (driver_eventloop_resume.go).
func (c *evConn) suspended() { c.signal(evLost) }

// attach hands conn over: the worker that runs the session's next turn
// registers it (driver_eventloop_resume.go).
func (c *evConn) attach(conn net.Conn, br *bufio.Reader) {
	c.next = &evNext{conn: conn, pre: handshakeBytes(br)}
}

func (c *evConn) resumed() { c.signal(evWake) }

// connClosed: Close closed the connection under the driver (Close's
// timeout): the event loop ends the session now.
func (c *evConn) connClosed() { c.signal(evKill) }
