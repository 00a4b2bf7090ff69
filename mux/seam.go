package mux

import (
	"errors"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/engine"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// The seam: the engine is called only with Session.mu held, and every
// release of mu goes through Session.unlock, which dispatches the events
// the calls produced (wake-ups of Reads, Writes, Open, Accept, the writer)
// first. Laying out a batch (NextBatch) and writing it,
// with the spliced chunks it references, is done only with sendMu held:
// one batch in flight at a time, in order.
//
// Lock order: Stream.wmu, then Session.sendMu, then Session.mu; a
// deadline's mutex is a leaf. sendMu is taken while mu is held only with
// TryLock (fastDriver.kick), which never waits. Nothing blocks on the
// connection with mu held: readers and writers release it first.

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
		s.drv.wake()
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
		st := streamOf(rec)
		if sev&engine.EvReadable != 0 {
			later.add(st.rdCh)
			later.add(st.lentCh)
			s.drv.readable(st)
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
		err := s.cfg.Handler(streamOf(rec))
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

// Writing a batch: the reference driver's write, which the fast paths' own
// batches (driver_fastpaths.go) share, and its end.

// writeBatch writes the batch b with the DATA runs spliced into it
// (s.batch's Segs; sendMu held, s.mu not held), ends it (batchWritten)
// and counts it. dead and closeBy are the session's state when b
// was laid out.
func (d *goDriver) writeBatch(b []byte, dead bool, closeBy time.Duration) error {
	s := d.s
	// The deadline is refreshed only when less than 3/4 of WriteTimeout
	// is left: a write always gets at least that long, and steady state
	// makes no deadline call per write.
	t := time.Now()
	switch {
	case dead && closeBy > 0:
		d.wdl = s.epoch.Add(closeBy)
		_ = s.conn.SetWriteDeadline(d.wdl)
	case d.wdl.Sub(t) < s.cfg.WriteTimeout*3/4:
		d.wdl = t.Add(s.cfg.WriteTimeout)
		_ = s.conn.SetWriteDeadline(d.wdl)
	}
	segs, n := s.batch.Segs, s.batch.SplicedLen
	err := d.wsc.WriteMessageSegments(b, segs)
	s.batchWritten() // whether the write succeeded or not
	if err != nil {
		return err
	}
	s.stats.MessagesOut.Add(1)
	s.stats.BytesOut.Add(uint64(len(b) - wsio.HeaderRoom + n))
	return nil
}

// batchWritten ends the batch just written (s.batch; sendMu held, s.mu
// not held): its spliced chunks go back, and its ACKs count as out, under
// s.mu when it carried any. They count as out even when the write failed:
// a resumable session retained the batch and replays it, in order, before
// anything laid out later; any other session ends, which closes Accepted
// too.
func (s *Session) batchWritten() {
	b := &s.batch
	if !b.HasAcks() {
		s.e.BatchWritten(b)
		return
	}
	s.mu.Lock()
	s.e.BatchWritten(b)
	s.unlock()
}
