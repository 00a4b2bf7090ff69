package mux

import (
	"errors"
	"os"
	"runtime"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/engine"
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// The goroutine driver: a reader goroutine feeds received messages to the
// engine, a writer goroutine writes its batches and runs its timers, and
// handler goroutines run Config.Handler. The fast paths of DriverFastPaths
// (leader reads in lead.go; kick here) are strategies on
// top of it, behind the same seam and under the same locks.
//
// The seam: the engine is called only with Session.mu held, and every
// release of mu goes through Session.unlock, which dispatches the events
// the calls produced (wake-ups of Reads, Writes, Open, Accept, the writer)
// first. Laying out a batch (AppendBatch) and writing it,
// with the spliced chunks it references, is done only with sendMu held:
// one batch in flight at a time, in order.
//
// Lock order: Stream.wmu, then Session.sendMu, then Session.mu; a
// deadline's mutex is a leaf. sendMu is taken while mu is held only with
// TryLock (kick), which never waits. Nothing blocks on the
// connection with mu held: readers and writers release it first.

// wakeWriter tells the writer goroutine there may be something to write.
func (s *Session) wakeWriter() {
	if s.ev != nil {
		s.ev.signal(evWake) // the event loop runs the session
		return
	}
	notify(s.wakeCh)
}

// unlock releases s.mu after dispatching what the engine's calls made
// happen: every path that called the engine while holding s.mu leaves
// through here.
func (s *Session) unlock() {
	if !s.e.HasEvents() {
		s.mu.Unlock()
		return
	}
	var later wakeList
	s.dispatch(&later)
	s.mu.Unlock()
	for _, ch := range later.ch[:later.n] {
		notify(ch)
	}
}

// wakeLater is how many stream wake-ups dispatch leaves until s.mu is
// released: a Read woken while the lock is still held would find it taken
// and park again (one batch of DATA wakes a Read on each stream it
// carries). The rest are sent at once.
const wakeLater = 16

// wakeList holds stream wake-ups until s.mu is released.
type wakeList struct {
	ch [wakeLater]chan struct{}
	n  int
}

// add keeps ch for later if there is room, else notifies it now.
func (w *wakeList) add(ch chan struct{}) {
	switch {
	case ch == nil:
	case w.n < len(w.ch):
		w.ch[w.n] = ch
		w.n++
	default:
		notify(ch)
	}
}

// dispatch turns the engine's events into wake-ups (s.mu held). Stream
// wake-ups go into later while it has room, for the caller to send once
// s.mu is released.
func (s *Session) dispatch(later *wakeList) {
	ev := s.e.Events()
	if ev&engine.EvSend != 0 {
		s.wakeWriter()
	}
	if ev&engine.EvAccept != 0 {
		notify(s.acceptCh)
	}
	if ev&engine.EvCredit != 0 {
		notify(s.creditCh)
	}
	if ev&engine.EvHandler != 0 {
		s.spawnHandlers()
	}
	if ev&engine.EvGoAway != 0 {
		s.goaway = true
		if s.goawayCh != nil {
			close(s.goawayCh)
		}
	}
	if ev&(engine.EvPong|engine.EvClosed) != 0 && s.pingDone != nil {
		close(s.pingDone)
		s.pingDone = nil
	}
	for {
		rec, sev := s.e.PopStreamEvent()
		if rec == nil {
			break
		}
		st := handle(rec)
		if sev&engine.EvReadable != 0 {
			later.add(st.rdCh)
			later.add(st.lentCh)
			if s.leader == st {
				s.interruptLeader()
			}
		}
		if sev&engine.EvWritable != 0 {
			later.add(st.wrCh)
		}
		if sev&engine.EvAnswered != 0 && st.ackCh != nil {
			close(st.ackCh)
		}
	}
	if ev&engine.EvClosed != 0 {
		if l := s.cfg.Logger; l != nil && s.e.Failed() {
			err := s.e.Err()
			l.Warn("wsmux: session error", "code", err.Code.String(), "err", err.Err)
		}
		close(s.deadCh)
	}
}

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
		if s.leadOK && s.wsc.Buffered() == 0 && (s.res == nil || s.res.confirm == nil) {
			// A waiting Read reads the socket meanwhile (after a
			// resume, from the second message on: the first one
			// retires the token the resume used).
			s.handOff()
		}
		msg, err := s.wsc.ReadMessage()
		s.mu.Lock()
		if err != nil {
			if !isPeerEnd(err) && s.lost(s.now(), err) {
				s.unlock() // suspended: the next connection gets a new reader
				return
			}
			s.readFailed(err)
			s.unlock()
			return
		}
		s.e.Feed(msg, s.now())
		s.unlock()
		if s.res != nil {
			s.confirmed()
		}
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
	var ce *wsio.CloseError
	var pe *wsio.ProtocolError
	switch {
	case errors.As(err, &ce):
		s.e.PeerClosed(ce.Code == ws.StatusNormalClosure || ce.Code == ws.StatusGoingAway || ce.Code == ws.StatusNoStatusRcvd, err)
	case errors.As(err, &pe):
		s.e.WebSocketViolation(uint16(pe.Close), err)
	default:
		s.e.ReadFailed(err)
	}
}

// writeLoop writes the preface, then batches until the session ends; it
// also runs the timers. It closes the connection when done.
func (s *Session) writeLoop() {
	defer close(s.writerDone)
	e := s.e
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var zero [wsio.HeaderRoom]byte
	first := true
	writeFailed := false
	var bp *[]byte // batch buffer, held from batch to batch while busy
	s.sendMu.Lock()
	for {
		if err := s.directErr; err != nil {
			s.directErr = nil
			if s.writeError(err) {
				continue // suspended: a resume brings a new connection
			}
			writeFailed = true
			break
		}
		if s.wsc.ControlPending() && !s.Suspended() {
			// A pong or close reply goes out even when no batch was
			// written for long: the deadline of the last one has passed.
			if t := time.Now(); s.wdl.Sub(t) < s.cfg.WriteTimeout*3/4 {
				s.wdl = t.Add(s.cfg.WriteTimeout)
				_ = s.conn.SetWriteDeadline(s.wdl)
			}
		}
		if err := s.wsc.FlushControl(); err != nil {
			s.mu.Lock()
			if s.lost(s.now(), err) {
				s.unlock()
				continue
			}
			e.WriteFailed(frame.InternalError, err)
			s.unlock()
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
			b = e.AppendPreface(b, now)
			first = false
		}
		if v := s.rxStart.Load(); v > 0 {
			e.SetPartial(time.Duration(v-1), true)
		} else {
			e.SetPartial(0, false)
		}
		e.Tick(now)
		if lost, err := e.TakeConnLost(); lost && !s.lost(now, err) { // resume.go
			e.FailConnLost()
		}
		b = e.AppendBatch(b, now)
		s.acks = e.TakeAcked(s.acks[:0])
		dead := e.Err() != nil
		finished := dead && e.FlushDone()
		wait := e.NextTimer(now)
		closeBy := e.CloseBy()
		s.unlock()
		if len(b) > wsio.HeaderRoom {
			err := s.writeBatch(b, dead, closeBy)
			*bp = b[:0] // kept for the next batch while busy
			if err != nil {
				if s.writeError(err) {
					continue // suspended
				}
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
	// sendMu stays held until the connection is closed: no direct write
	// may follow the close.
	s.finish(writeFailed)
}

// writeBatch writes the batch b with the DATA runs spliced into it (the
// engine's Spliced; sendMu held, s.mu not held), signals the ACKs it
// carried and counts it. dead and closeBy are the session's state when b
// was laid out.
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
	segs, n := s.e.Spliced()
	err := s.wsc.WriteMessageSegments(b, segs)
	s.e.ReleaseSpliced()
	s.acksOut() // whether the write succeeded or not
	if err != nil {
		return err
	}
	s.stats.MessagesOut.Add(1)
	s.stats.BytesOut.Add(uint64(len(b) - wsio.HeaderRoom + n))
	return nil
}

// acksOut tells the engine that the ACKs of the batch just written (s.acks)
// are out (s.mu not held). They count as out even when the write failed:
// a resumable session retained the batch and replays it, in order, before
// anything laid out later; any other session ends, which closes Accepted
// too.
func (s *Session) acksOut() {
	if len(s.acks) == 0 {
		return
	}
	s.mu.Lock()
	s.e.AcksWritten(s.acks)
	s.unlock()
	clear(s.acks)
	s.acks = s.acks[:0]
}

// writeError ends the session after a failed write (writer goroutine,
// sendMu held), or suspends it (true) when it may resume.
func (s *Session) writeError(err error) bool {
	if s.res != nil {
		s.mu.Lock()
		ok := s.lost(s.now(), err)
		s.unlock()
		if ok {
			return true
		}
	}
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
	s.e.WriteFailed(code, err)
	s.unlock()
	return false
}

// directWriteMax is the largest Write that sends its own batch whatever
// else is queued. A larger one does so only when its stream is the only
// one with DATA to send and has no write deadline: one bulk stream then
// saves the two goroutine handoffs of waking the writer and waiting for it
// (docs/performance-history.md, "Direct writes"), its caller waiting on the
// socket as a yamux or x/net/http2 Write does, and a Write's goroutine
// never writes other streams' bulk. A deadline cannot bound a socket write under
// way (stopping inside a WebSocket message would break the connection),
// and a small write seldom finds the socket full.
const directWriteMax = 4 << 10

// kick gets queued bytes moving after a Write of n bytes on st (s.mu
// held; it releases it). When the writer goroutine is parked and nothing
// else is being written, the calling goroutine may lay out and write the
// batch itself (see directWriteMax); otherwise it wakes the writer.
func (s *Session) kick(st *Stream, n int) {
	if s.ev != nil {
		s.ev.kick() // the event loop's own direct write
		return
	}
	direct := n <= directWriteMax || s.e.SoleSender(&st.rec) && !st.writeDeadlineSet()
	if !direct || !s.takeWriter() {
		s.wakeWriter()
		s.unlock()
		return
	}
	bp := pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
	s.writeOwnBatch(bp, s.e.AppendBatch((*bp)[:wsio.HeaderRoom], s.now()))
}

// takeWriter reports whether the calling goroutine may lay out and write a
// batch itself, and then holds sendMu (s.mu held): the driver allows it,
// the writer goroutine is parked, the session may send DATA and no
// WebSocket control frame waits for the writer.
func (s *Session) takeWriter() bool {
	if !s.directWrites || !s.writerParked.Load() || !s.e.Ready() || s.wsc.ControlPending() || !s.sendMu.TryLock() {
		return false
	}
	if s.directErr != nil || !s.writerParked.Load() {
		s.sendMu.Unlock()
		return false
	}
	return true
}

// writeOwnBatch writes the batch b (in bp) the calling goroutine laid out
// after takeWriter (s.mu and sendMu held; it releases both), then wakes
// the writer goroutine for what did not fit, for a stall that began (its
// timer; other timers only move later) and for a failed write.
func (s *Session) writeOwnBatch(bp *[]byte, b []byte) {
	s.acks = s.e.TakeAcked(s.acks[:0])
	more := s.e.Pending()
	s.unlock()
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
		s.wakeWriter()
	}
}

// finish sends the WebSocket close, lets the peer answer for a moment and
// closes the connection (writer goroutine).
func (s *Session) finish(writeFailed bool) {
	s.mu.Lock()
	code, reason := s.closeStatus()
	peerClosed := s.e.ClosedByPeer()
	closeBy := s.e.CloseBy()
	s.unlock()
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
		s.unlock()
		select {
		case <-s.readerDone:
		case <-time.After(time.Until(linger)):
		}
	}
	_ = s.conn.Close()
	<-s.readerDone
	s.unregister()
	// A resume that waits for sendMu (attach) now finds the connection
	// closed and gives up; a direct write cannot start (the writer is not
	// parked).
	s.sendMu.Unlock()
	close(s.done)
}

// closeStatus returns the WebSocket close status and reason that end the
// ended session (s.mu held): a local error's text goes to the peer, cut
// to fit a close frame.
func (s *Session) closeStatus() (ws.StatusCode, string) {
	serr := s.e.Err()
	code := wsCloseCode(serr)
	if st := s.e.CloseStatus(); st != 0 {
		code = ws.StatusCode(st)
	}
	reason := ""
	if serr.Err != nil && !serr.Remote {
		reason = engine.TruncText(serr.Err.Error(), 120)
	}
	return code, reason
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
	for s.workers < s.cfg.HandlerConcurrency && s.workers < s.e.HandlersWaiting() {
		s.workers++
		go s.handlerWorker()
	}
}

// handlerWorker runs Handler for queued streams and exits when none is left.
func (s *Session) handlerWorker() {
	e := s.e
	for {
		s.mu.Lock()
		rec := e.TakeHandler()
		if rec == nil {
			s.workers--
			s.unlock()
			return
		}
		s.unlock()
		err := s.cfg.Handler(handle(rec))
		s.mu.Lock()
		e.HandlerDone(rec, err, s.now())
		s.unlock()
	}
}

// notify does a non-blocking send on a capacity-1 channel.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
