package mux

import (
	"errors"
	"os"
	"runtime"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// The goroutine driver: a reader goroutine feeds received messages to the
// engine, a writer goroutine writes its batches and runs its timers, and
// handler goroutines run Config.Handler (seam.go). The fast paths of
// DriverFastPaths (driver_fastpaths*.go) are strategies on top of it,
// behind the same seam (seam.go) and under the same locks.

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
