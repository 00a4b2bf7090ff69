package mux

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// Session is one WSMUX/1 connection: many Streams over one WebSocket. It
// implements net.Listener (Accept returns the streams the peer opens). All
// methods are safe for concurrent use.
//
// A session runs two goroutines: a reader (WebSocket messages into the
// session state) and a writer (batches of frames out, timers). Handler
// calls run on a bounded pool of further goroutines.
type Session struct {
	cfg   *Config
	conn  net.Conn
	wsc   *wsio.Conn
	epoch time.Time
	stats statsCounters

	rxStart atomic.Int64 // 1 + session clock when the message being received started; 0: none

	mu       sync.Mutex
	c        *core
	workers  int // handler goroutines running
	closeReq bool

	// sendMu is held by whoever builds and writes a batch: the writer
	// goroutine, or a Write that sends its own small batch while the
	// writer is parked (directWrite). Lock order: sendMu before mu.
	sendMu       sync.Mutex
	writerParked atomic.Bool // the writer waits for work (set before it releases sendMu)
	wdl          time.Time   // write deadline in force (sendMu)
	directErr    error       // a direct write failed; the writer handles it (sendMu)
	acks         []*Stream   // HEADERS ACKs in the batch being written (sendMu)
	sp           splice      // DATA the batch being written splices in (sendMu; core.splice)

	// The read token and leader reads (lead.go); s.mu.
	tok         int8
	leader      *Stream       // the Read of this stream holds the token
	leadWant    *Stream       // a Read of this stream waits and may lead
	peeking     bool          // the leader is in wsio.Conn.Wait
	interrupted bool          // interruptLeader set a read deadline in the past
	lingering   bool          // finish set the read deadline: leave it alone
	leadFailed  bool          // a leader's read failed: the reader reads next
	leadOK      bool          // the connection supports leader reads
	leadGen     uint32        // counts the times a Read took the token
	tickDue     time.Duration // session clock: when the reader goroutine's next check fires
	ticks       uint64        // checks the reader goroutine made (tests)
	tokCh       chan struct{}
	tokTimer    *time.Timer

	wakeCh     chan struct{}
	readerDone chan struct{}
	writerDone chan struct{}
	done       chan struct{}
	closeOnce  sync.Once
}

// NewSession starts a session over conn, a connection that has completed
// its WebSocket handshake (subprotocol wsmux.v1). br, when not nil, is the
// reader the handshake used; bytes it already buffered are read first.
// client selects the role: the client masks its frames and opens odd
// stream ids. cfg nil means DefaultConfig().
//
// Most programs use Dial, Dialer.Dial or Upgrade instead.
func NewSession(conn net.Conn, br *bufio.Reader, client bool, cfg *Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Session{
		cfg:        cfg,
		conn:       conn,
		wsc:        wsio.New(conn, br, client, cfg.MaxMessageSize),
		epoch:      time.Now(),
		wakeCh:     make(chan struct{}, 1),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	s.c = newCore(cfg, client, &s.stats, 0)
	s.c.sess = s
	if wsio.Vectored(conn) {
		s.c.splice = &s.sp
	}
	s.leadOK = wsio.Interruptible(conn)
	s.tokCh = make(chan struct{}, 1)
	s.tokTimer = time.NewTimer(time.Hour)
	s.tokTimer.Stop()
	s.c.wake = s.wake
	s.c.onHandler = s.spawnHandlers
	s.wsc.SetNotify(s.wake)
	s.wsc.SetMessageHook(s.messageHook)
	go s.writeLoop()
	go s.readLoop()
	return s, nil
}

// Client starts the client side of a session over an upgraded WebSocket
// connection (see NewSession).
func Client(conn net.Conn, cfg *Config) (*Session, error) { return NewSession(conn, nil, true, cfg) }

// Server starts the server side of a session over an upgraded WebSocket
// connection (see NewSession).
func Server(conn net.Conn, cfg *Config) (*Session, error) { return NewSession(conn, nil, false, cfg) }

func (s *Session) now() time.Duration { return time.Since(s.epoch) }

func (s *Session) wake() { notify(s.wakeCh) }

// messageHook records when the message being received started (reader
// goroutine); the writer's timers bound how long it may stay partial.
func (s *Session) messageHook(started bool) {
	if started {
		s.rxStart.Store(int64(s.now()) + 1)
	} else {
		s.rxStart.Store(0)
	}
}

// yieldMessage is the largest message after which the reader yields.
const yieldMessage = 4 << 10

// readLoop feeds every message to the core until the connection fails.
func (s *Session) readLoop() {
	defer close(s.readerDone)
	for {
		if s.leadOK && s.wsc.Buffered() == 0 {
			s.handOff() // a waiting Read reads the socket meanwhile
		}
		msg, err := s.wsc.ReadMessage()
		s.mu.Lock()
		if err != nil {
			s.readFailed(err)
			s.mu.Unlock()
			return
		}
		s.c.feed(msg, s.now())
		s.mu.Unlock()
		if len(msg) <= yieldMessage {
			// A small message most likely woke a Read waiting for it:
			// let that goroutine run here now (it is next on this P),
			// before this one's next read, which usually finds the
			// socket empty and parks. That takes a system call off
			// the request/response path.
			runtime.Gosched()
		}
	}
}

// readFailed ends the session after a read error (s.mu held).
func (s *Session) readFailed(err error) {
	c := s.c
	var ce *wsio.CloseError
	var pe *wsio.ProtocolError
	switch {
	case errors.As(err, &ce):
		c.wsClosedByPeer = true
		if c.goawayRecv {
			c.die(&SessionError{Code: c.peerGoAway.Code, Remote: true, Err: err}, false, false)
			break
		}
		code := frame.NoError
		if ce.Code != ws.StatusNormalClosure && ce.Code != ws.StatusGoingAway && ce.Code != ws.StatusNoStatusRcvd {
			code = frame.ProtocolError
		}
		if c.err == nil && code != frame.NoError {
			c.stats.countError(code)
		}
		c.die(&SessionError{Code: code, Remote: true, Err: err}, false, false)
	case errors.As(err, &pe):
		c.wsCloseCode = uint16(pe.Close)
		c.fail(frame.ProtocolError, err)
	default:
		c.noGoAway = true
		code := frame.InternalError
		if c.goawayRecv {
			code = c.peerGoAway.Code
		}
		c.die(&SessionError{Code: code, Remote: true, Err: err}, false, false)
	}
}

// writeLoop writes the preface, then batches until the session ends; it
// also runs the timers. It closes the connection when done.
func (s *Session) writeLoop() {
	defer close(s.writerDone)
	c := s.c
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var zero [wsio.HeaderRoom]byte
	first := true
	writeFailed := false
	var bp *[]byte // batch buffer, held from batch to batch while busy
	s.sendMu.Lock()
	for {
		if err := s.directErr; err != nil {
			s.writeError(err)
			writeFailed = true
			break
		}
		if s.wsc.ControlPending() {
			// A pong or close reply goes out even when no batch was
			// written for long: the deadline of the last one has passed.
			if t := time.Now(); s.wdl.Sub(t) < s.cfg.WriteTimeout*3/4 {
				s.wdl = t.Add(s.cfg.WriteTimeout)
				_ = s.conn.SetWriteDeadline(s.wdl)
			}
		}
		if err := s.wsc.FlushControl(); err != nil {
			s.mu.Lock()
			c.noGoAway = true
			c.die(&SessionError{Code: frame.InternalError, Err: err}, false, false)
			s.mu.Unlock()
			writeFailed = true
			break
		}
		if bp == nil {
			bp = pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
		}
		b := append((*bp)[:0], zero[:]...)
		s.mu.Lock()
		now := s.now()
		if first {
			b = c.appendPreface(b)
			c.lastSend = now
			c.sendPing(now) // first RTT sample
			first = false
		}
		if v := s.rxStart.Load(); v > 0 {
			c.setPartial(time.Duration(v-1), true)
		} else {
			c.setPartial(0, false)
		}
		c.tick(now)
		b = c.appendBatch(b, now)
		s.takeAcks()
		dead := c.err != nil
		finished := dead && c.flushDone()
		wait := c.nextTimer(now)
		closeBy := c.closeBy
		s.mu.Unlock()
		if len(b) > wsio.HeaderRoom {
			err := s.writeBatch(b, dead, closeBy)
			*bp = b[:0] // kept for the next batch while busy
			if err != nil {
				s.writeError(err)
				writeFailed = true
				break
			}
			if finished {
				break
			}
			continue
		}
		// Going idle: the buffer goes back to the pool, so an idle session
		// holds none.
		*bp = b[:0]
		pool.PutBatch(bp)
		bp = nil
		if finished {
			break
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		s.writerParked.Store(true)
		s.sendMu.Unlock()
		select {
		case <-s.wakeCh:
		case <-timer.C:
		}
		s.writerParked.Store(false)
		s.sendMu.Lock()
	}
	// sendMu stays held: no direct write may follow the close.
	s.finish(writeFailed)
}

// takeAcks moves the HEADERS ACKs the batch just laid out to s.acks, to be
// signalled once the batch is written (s.mu and sendMu held).
func (s *Session) takeAcks() {
	c := s.c
	s.acks = append(s.acks[:0], c.ackedList...)
	clear(c.ackedList)
	c.ackedList = c.ackedList[:0]
}

// writeBatch writes the batch b with the DATA runs spliced into it (s.sp;
// sendMu held, s.mu not held), then counts it and signals the ACKs it
// carried. dead and closeBy are the session's
// state when b was laid out.
func (s *Session) writeBatch(b []byte, dead bool, closeBy time.Duration) error {
	// The deadline is refreshed only when less than 3/4 of WriteTimeout
	// is left: a write always gets at least that long, and steady state
	// makes no deadline call per write.
	t := time.Now()
	switch {
	case dead && closeBy > 0:
		s.wdl = s.epoch.Add(closeBy)
		_ = s.conn.SetWriteDeadline(s.wdl)
	case s.wdl.Sub(t) < s.cfg.WriteTimeout*3/4:
		s.wdl = t.Add(s.cfg.WriteTimeout)
		_ = s.conn.SetWriteDeadline(s.wdl)
	}
	n := s.sp.n
	err := s.wsc.WriteMessageSegments(b, s.sp.segs)
	s.sp.release()
	if err != nil {
		return err
	}
	s.stats.messagesOut.Add(1)
	s.stats.bytesOut.Add(uint64(len(b) - wsio.HeaderRoom + n))
	if len(s.acks) > 0 {
		s.mu.Lock()
		for _, st := range s.acks {
			st.closeAck()
		}
		s.mu.Unlock()
		clear(s.acks)
		s.acks = s.acks[:0]
	}
	return nil
}

// writeError ends the session after a failed write (writer goroutine,
// sendMu held).
func (s *Session) writeError(err error) {
	c := s.c
	if errors.Is(err, wsio.ErrCloseSent) {
		// The reader got the peer's close and FlushControl answered it:
		// the reader's account of the end wins.
		<-s.readerDone
	}
	code := frame.InternalError
	if errors.Is(err, os.ErrDeadlineExceeded) {
		code = frame.StallTimeout // no write progress for WriteTimeout
	}
	s.mu.Lock()
	c.noGoAway = true
	if c.err == nil {
		c.stats.countError(code)
	}
	c.die(&SessionError{Code: code, Err: err}, false, false)
	s.mu.Unlock()
}

// directWriteMax is the largest Write that may send its own batch instead
// of waking the writer goroutine: interactive writes (keystrokes, small
// requests, echoes) save two goroutine handoffs per round trip, while bulk
// writes keep the writer's batching and its overlap with the application.
const directWriteMax = 4 << 10

// kick gets queued bytes moving after a Write of n bytes (s.mu held; it
// releases it). When the writer goroutine is parked, nothing else is being
// written, and the write is small, the calling goroutine lays out and
// writes the batch itself; otherwise it wakes the writer.
func (s *Session) kick(n int) {
	c := s.c
	if n > directWriteMax || !s.writerParked.Load() || c.err != nil || !c.gotSettings ||
		s.wsc.ControlPending() || !s.sendMu.TryLock() {
		c.wake()
		s.mu.Unlock()
		return
	}
	if s.directErr != nil || !s.writerParked.Load() {
		s.sendMu.Unlock()
		c.wake()
		s.mu.Unlock()
		return
	}
	bp := pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
	b := (*bp)[:wsio.HeaderRoom]
	now := s.now()
	b = c.appendBatch(b, now)
	s.takeAcks()
	// The writer runs again for what did not fit and for a stall that
	// began (its timer); other timers only move later.
	more := c.lists[0].head != nil || c.lists[1].head != nil || !c.urgent.empty() || !c.credit.empty() || c.stalled
	s.mu.Unlock()
	if len(b) > wsio.HeaderRoom {
		if err := s.writeBatch(b, false, 0); err != nil {
			s.directErr = err
			more = true
		}
	}
	*bp = b[:0]
	pool.PutBatch(bp)
	s.sendMu.Unlock()
	if more {
		s.wake() // what did not fit, or the error, is the writer's
	}
}

// finish sends the WebSocket close, lets the peer answer for a moment and
// closes the connection (writer goroutine).
func (s *Session) finish(writeFailed bool) {
	s.mu.Lock()
	c := s.c
	code := wsCloseCode(c.err)
	if c.wsCloseCode != 0 {
		code = ws.StatusCode(c.wsCloseCode)
	}
	peerClosed := c.wsClosedByPeer
	reason := ""
	if c.err.Err != nil && !c.err.Remote {
		reason = truncText(c.err.Err.Error(), 120)
	}
	closeBy := c.closeBy
	s.mu.Unlock()
	if !writeFailed {
		linger := time.Now().Add(min(closeLinger, s.cfg.CloseTimeout))
		if closeBy > 0 {
			if t := s.epoch.Add(closeBy); t.Before(linger) {
				linger = t
			}
		}
		_ = s.conn.SetWriteDeadline(linger)
		if peerClosed {
			_ = s.wsc.FlushControl()
		} else {
			_ = s.wsc.WriteClose(code, reason)
		}
		s.mu.Lock()
		s.lingering = true // a leader must not clear this deadline
		_ = s.conn.SetReadDeadline(linger)
		s.mu.Unlock()
		select {
		case <-s.readerDone:
		case <-time.After(time.Until(linger)):
		}
	}
	_ = s.conn.Close()
	<-s.readerDone
	close(s.done)
}

// wsCloseCode maps a session error to a WebSocket close status.
func wsCloseCode(e *SessionError) ws.StatusCode {
	if e == nil {
		return ws.StatusNormalClosure
	}
	switch e.Code {
	case frame.NoError, frame.IdleTimeout:
		return ws.StatusNormalClosure
	case frame.KeepaliveTimeout, frame.SettingsTimeout, frame.StallTimeout:
		return ws.StatusGoingAway
	case frame.EnhanceYourCalm, frame.StreamLimit, frame.HeaderTooLarge, frame.MemoryLimit:
		return ws.StatusPolicyViolation
	case frame.InternalError:
		return ws.StatusInternalServerError
	}
	return ws.StatusProtocolError
}

// spawnHandlers starts handler goroutines for queued streams, up to
// HandlerConcurrency (s.mu held).
func (s *Session) spawnHandlers() {
	for s.workers < s.cfg.HandlerConcurrency && s.workers < len(s.c.handlerQ) {
		s.workers++
		go s.handlerWorker()
	}
}

// handlerWorker runs Handler for queued streams and exits when none is left.
func (s *Session) handlerWorker() {
	c := s.c
	for {
		s.mu.Lock()
		if c.err != nil { // the session ended: nothing left to handle
			for _, st := range c.handlerQ {
				st.handled = true
				st.closeAck()
			}
			clear(c.handlerQ)
			c.handlerQ = c.handlerQ[:0]
		}
		if len(c.handlerQ) == 0 {
			s.workers--
			s.mu.Unlock()
			return
		}
		st := c.handlerQ[0]
		copy(c.handlerQ, c.handlerQ[1:])
		c.handlerQ[len(c.handlerQ)-1] = nil
		c.handlerQ = c.handlerQ[:len(c.handlerQ)-1]
		s.mu.Unlock()
		err := s.cfg.Handler(st)
		s.mu.Lock()
		st.handled = true
		if c.err == nil {
			if err == nil {
				if st.resetErr == nil {
					c.queueAck(st)
				}
			} else {
				code := frame.RefusedStream
				reason := ""
				var se *StreamError
				if errors.As(err, &se) {
					code, reason = se.Code, se.Reason
				}
				c.resetStream(st, code, reason, s.now(), false)
			}
		}
		if c.err != nil {
			st.closeAck()
		}
		c.maybeFinish(st)
		s.mu.Unlock()
	}
}

// Open opens a stream with headers h and waits for the peer to accept it.
// A refusal (a Handler error on the peer) returns a *StreamError with the
// peer's code, typically REFUSED_STREAM. ctx and Config.OpenTimeout bound
// the wait, which also ends at once when the session does.
func (s *Session) Open(ctx context.Context, h http.Header) (*Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout)
	defer cancel()
	st, err := s.open(ctx, h)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ack := st.ackChan()
	s.reclaim()
	s.mu.Unlock()
	select {
	case <-ack:
	case <-ctx.Done():
		_ = st.Reset(frame.Cancel)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrTimeout
		}
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.acked {
		return st, nil
	}
	if st.resetErr != nil {
		return nil, st.resetErr
	}
	return nil, s.c.err
}

// OpenEarly opens a stream with headers h without waiting for the peer's
// answer: Writes may follow at once within the initial window. A later
// refusal shows as a *StreamError from Read and Write. It waits only when
// the peer's stream credit is used up, bounded by Config.OpenTimeout.
//
// Right after the session starts, OpenEarly waits for the peer's SETTINGS
// (its first frame: half a round trip at most), since the peer's stream
// credit and windows may be below the protocol defaults.
func (s *Session) OpenEarly(h http.Header) (*Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	defer cancel()
	return s.open(ctx, h)
}

func (s *Session) open(ctx context.Context, h http.Header) (*Stream, error) {
	c := s.c
	s.mu.Lock()
	for {
		if c.err != nil {
			s.mu.Unlock()
			return nil, c.err
		}
		if c.goawaySent || c.goawayRecv {
			s.mu.Unlock()
			return nil, ErrGoAway
		}
		if c.canOpen() {
			break
		}
		s.reclaim()
		s.mu.Unlock()
		select {
		case <-c.creditCh:
		case <-c.deadCh:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, ErrTimeout
			}
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	var block []byte
	if len(h) > 0 {
		var err error
		if block, err = frame.AppendHeaderBlock(nil, h, &c.peerBlock); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	st := c.openLocal(block, s.now())
	if c.canOpen() {
		notify(c.creditCh) // let the next opener in
	}
	s.mu.Unlock()
	return st, nil
}

// AcceptStream waits for the next stream the peer opens. It fails when ctx
// ends or the session does. With a Config.Handler it never returns a
// stream.
func (s *Session) AcceptStream(ctx context.Context) (*Stream, error) {
	c := s.c
	for {
		s.mu.Lock()
		if c.err != nil {
			s.mu.Unlock()
			return nil, c.err
		}
		if len(c.acceptQ) > 0 {
			st := c.acceptQ[0]
			copy(c.acceptQ, c.acceptQ[1:])
			c.acceptQ[len(c.acceptQ)-1] = nil
			c.acceptQ = c.acceptQ[:len(c.acceptQ)-1]
			if len(c.acceptQ) > 0 {
				notify(c.acceptCh)
			}
			st.handled = true
			c.maybeFinish(st)
			s.mu.Unlock()
			return st, nil
		}
		s.reclaim()
		s.mu.Unlock()
		select {
		case <-c.acceptCh:
		case <-c.deadCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Accept waits for the next stream the peer opens (net.Listener).
func (s *Session) Accept() (net.Conn, error) {
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Addr returns the local address (net.Listener).
func (s *Session) Addr() net.Addr { return s.LocalAddr() }

// LocalAddr returns the connection's local address.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the connection's remote address.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// Ping sends a PING and returns the round-trip time when its answer comes.
// Only one PING is outstanding at a time: concurrent calls share it. The
// session sends at most 20 PINGs and then 10 a second (a wsmux peer treats
// more as a flood), so calls beyond that wait for their turn; ctx bounds
// the wait.
func (s *Session) Ping(ctx context.Context) (time.Duration, error) {
	c := s.c
	s.mu.Lock()
	if c.err != nil {
		s.mu.Unlock()
		return 0, c.err
	}
	if !c.pingOut {
		c.sendPing(s.now())
	}
	if c.pingDone == nil {
		c.pingDone = make(chan struct{})
	}
	ch := c.pingDone
	s.reclaim()
	s.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	return c.lastRTT, nil
}

// GoAway starts a graceful shutdown: a GOAWAY with code tells the peer to
// open no new streams, and Open fails with ErrGoAway here too; existing
// streams finish. The session closes when the last stream ends, or after
// Config.CloseTimeout.
func (s *Session) GoAway(code frame.ErrorCode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.err != nil {
		return s.c.err
	}
	s.c.goAway(code, s.now())
	return nil
}

// Close ends the session: every stream ends here (received bytes still
// buffered stay readable, then Read and Write fail with the session's
// error), GOAWAY(NO_ERROR) goes out, bytes that Writes already queued are
// still sent (the peer reads them, then EOF), then the WebSocket close, and
// the connection is closed. It returns within Config.CloseTimeout even if
// the peer never reads, and is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	s.c.shutdown(s.now())
	s.reclaim()
	s.mu.Unlock()
	s.closeOnce.Do(func() {
		t := time.NewTimer(s.cfg.CloseTimeout)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			_ = s.conn.Close() // unblocks the writer
			<-s.done
		}
	})
	<-s.done
	return nil
}

// CloseChan returns a channel closed when the session ends (for whatever
// reason); Err then tells why.
func (s *Session) CloseChan() <-chan struct{} { return s.c.deadCh }

// Done returns a channel closed once the session's goroutines have exited
// and the connection is closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session runs, then the *SessionError that ended
// it (Code NO_ERROR and Err ErrSessionClosed after Close).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.err == nil {
		return nil
	}
	return s.c.err
}

// SetIdleTimeout closes the session (GOAWAY IDLE_TIMEOUT) after d without
// DATA or HEADERS activity either way; keepalive PINGs and window updates do
// not count. The clock restarts now; 0 turns it off.
func (s *Session) SetIdleTimeout(d time.Duration) {
	s.mu.Lock()
	s.c.idleTimeout = d
	s.c.lastActivity = s.now()
	s.mu.Unlock()
	s.wake()
}

// NumStreams returns the number of streams not yet ended both ways.
func (s *Session) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.c.streams)
}

// Stats are a session's counters. Bytes are WebSocket message payload bytes.
type Stats struct {
	BytesIn, BytesOut       uint64
	FramesIn, FramesOut     uint64
	MessagesIn, MessagesOut uint64
	StreamsOpened           uint64 // by us
	StreamsAccepted         uint64 // opened by the peer and not refused
	ResetsLocal             uint64 // RST_STREAM we sent
	ResetsRemote            uint64 // RST_STREAM we received
	// LeaderMessages counts the messages a waiting Read read from the
	// connection itself instead of the reader goroutine (leader reads:
	// no goroutine handoff between the socket and the application).
	LeaderMessages uint64
	// Errors counts session and stream errors by code (those we detected
	// and those the peer reported).
	Errors map[frame.ErrorCode]uint64
}

// statsCounters are updated atomically and read any time.
type statsCounters struct {
	bytesIn, bytesOut, framesIn, framesOut, messagesIn, messagesOut atomic.Uint64
	streamsOpened, streamsAccepted, resetsLocal, resetsRemote       atomic.Uint64
	leaderMessages                                                  atomic.Uint64
	errors                                                          [0x16]atomic.Uint64
	otherErrors                                                     atomic.Uint64
}

func (sc *statsCounters) countError(code frame.ErrorCode) {
	if int(code) < len(sc.errors) {
		sc.errors[code].Add(1)
	} else {
		sc.otherErrors.Add(1)
	}
}

// Stats returns a snapshot of the session's counters.
func (s *Session) Stats() Stats {
	sc := &s.stats
	st := Stats{
		BytesIn: sc.bytesIn.Load(), BytesOut: sc.bytesOut.Load(),
		FramesIn: sc.framesIn.Load(), FramesOut: sc.framesOut.Load(),
		MessagesIn: sc.messagesIn.Load(), MessagesOut: sc.messagesOut.Load(),
		StreamsOpened: sc.streamsOpened.Load(), StreamsAccepted: sc.streamsAccepted.Load(),
		ResetsLocal: sc.resetsLocal.Load(), ResetsRemote: sc.resetsRemote.Load(),
		LeaderMessages: sc.leaderMessages.Load(),
		Errors:         map[frame.ErrorCode]uint64{},
	}
	for i := range sc.errors {
		if v := sc.errors[i].Load(); v > 0 {
			st.Errors[frame.ErrorCode(i)] = v
		}
	}
	if v := sc.otherErrors.Load(); v > 0 {
		st.Errors[frame.ErrorCode(0xFFFFFFFF)] = v
	}
	return st
}

var _ net.Listener = (*Session)(nil)
