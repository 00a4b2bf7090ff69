package mux

import (
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

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
