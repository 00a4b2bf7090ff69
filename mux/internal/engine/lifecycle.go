package engine

import (
	"errors"
	"slices"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// fail ends the session with a local error: GOAWAY(code) goes out first,
// then the WebSocket close.
func (e *Engine) fail(code frame.ErrorCode, err error) {
	if e.err != nil {
		return
	}
	e.stats.CountError(code)
	e.failed = true
	e.die(&SessionError{Code: code, Err: err}, true, false)
}

// failFrame ends the session with the code a codec or flow error carries.
func (e *Engine) failFrame(err error) {
	var fe *frame.Error
	code := frame.ProtocolError
	if errors.As(err, &fe) {
		code = fe.Code
	}
	e.fail(code, err)
}

// die records the session's end, wakes everybody and, if goaway, queues
// the GOAWAY that is the last frame we send.
func (e *Engine) die(se *SessionError, goaway, flush bool) {
	if e.err != nil {
		return
	}
	e.err = se
	if flush {
		// A stream the application accepted keeps its ACK: the peer's
		// Open (Kubernetes' CreateStream) must not fail for a stream whose
		// data and FIN we are still flushing.
		e.credit.keepAcks()
	} else {
		e.credit.clear()
	}
	// A failing session sends nothing but its GOAWAY, and one whose
	// transport is gone sends nothing at all. A closing one keeps its
	// queued SYNs and resets (the DATA it still flushes must not reach the
	// peer before them); one whose drain ended (or timed out) keeps only
	// its resets: the last streams' RST_STREAMs still go out.
	quiet := (goaway && !flush) || e.noGoAway || e.wsClosedByPeer
	switch {
	case quiet:
		e.urgent.clear()
		e.peerUrg, e.pingAcks = 0, 0
	case !flush:
		e.urgent.keepResets()
		e.peerUrg, e.pingAcks = 0, 0
	}
	if goaway && !e.noGoAway {
		text := ""
		if se.Err != nil && !se.Remote {
			text = TruncText(se.Err.Error(), frame.MaxDebugLen)
		}
		e.urgent.push(ctrl{typ: frame.TypeGoAway, id: e.lastPeerID, arg: uint32(se.Code), text: text})
		e.goawaySent = true
	}
	e.flushing = flush
	for _, st := range e.streams {
		if !flush || st.flushing {
			if st.flushing && !quiet {
				// Reset with data still queued: the data is dropped,
				// the reset still goes out.
				e.urgent.push(ctrl{typ: frame.TypeRSTStream, id: st.id, arg: uint32(st.resetErr.Code), text: TruncText(st.resetErr.Reason, frame.MaxReasonLen)})
			}
			e.unlink(st)
			e.txQueued -= st.txq.Len()
			st.txq.reset()
			st.flushing = false
		}
		e.emitStream(st, EvReadable|EvWritable)
		e.answer(st) // Open and Accepted waiters
	}
	if !flush {
		e.txQueued = 0
	}
	for _, st := range e.acceptQ {
		e.emitStream(st, EvReadable|EvWritable)
	}
	e.emit(EvClosed)
	e.wake()
}

// TruncText cuts s to at most n bytes, not inside a UTF-8 sequence.
func TruncText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 { // do not cut a UTF-8 sequence
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0xC0 {
		s = s[:len(s)-1]
	}
	return s
}

// pushUrgent queues an urgent frame; peer-induced ones are bounded.

// resetStream resets st locally with code: both directions end, unread
// bytes are dropped and credited back, and RST_STREAM goes out. With flush,
// bytes Write already queued are sent first (as far as credit allows), so
// the peer reads them before the reset.
func (e *Engine) resetStream(st *Stream, code frame.ErrorCode, reason string, now time.Duration, flush bool) {
	if st.resetErr != nil || e.err != nil {
		return
	}
	e.stats.ResetsLocal.Add(1)
	if n := st.rxq.Len() + st.dropLent(); n > 0 {
		st.rxq.reset()
		e.queueSessionWU(e.sessRecv.Consume(n, now, 0))
	}
	if flush && st.txq.Len() > 0 && !st.finSent {
		st.flushing = true
		st.resetErr = &StreamError{Code: code, Reason: reason}
		if st.local && !st.acked {
			e.answer(st)
		}
		e.emitStream(st, EvReadable|EvWritable)
		e.link(st)
		if st.inList == 0 {
			e.finishFlush(st)
		}
		e.wake()
		return
	}
	e.queueRST(st.id, code, reason, false)
	e.endStream(st, &StreamError{Code: code, Reason: reason}, true)
}

// finishFlush sends the RST_STREAM of a flushed reset and ends the stream.
func (e *Engine) finishFlush(st *Stream) {
	if !st.flushing {
		return
	}
	st.flushing = false
	e.txQueued -= st.txq.Len()
	st.txq.reset()
	e.unlink(st)
	e.queueRST(st.id, st.resetErr.Code, st.resetErr.Reason, false) // set by resetStream
	e.maybeFinish(st)
}

// endStream ends both directions of st with err (a reset either way).
// Buffered received bytes stay readable.
func (e *Engine) endStream(st *Stream, err *StreamError, local bool) {
	if st.resetErr != nil && !st.flushing {
		return
	}
	if st.resetErr == nil {
		st.resetErr = err
	}
	st.flushing = false
	e.txQueued -= st.txq.Len()
	st.txq.reset()
	e.unlink(st)
	if st.local && !st.acked {
		e.answer(st)
	}
	e.dropUntaken(st)
	e.emitStream(st, EvReadable|EvWritable)
	e.maybeFinish(st)
}

// dropUntaken takes a peer stream that was reset (either way) while it
// still waited for the application, in the accept queue or for a handler,
// out of that queue: it never reaches the application, and the receiver is
// done with it at once (spec 7.3), so its slot comes back when it ends,
// like the slot of a stream that leaves the backlog. How fast a peer can
// cycle slots this way is what the reset budget bounds.
func (e *Engine) dropUntaken(st *Stream) {
	if st.local || st.handled {
		return
	}
	for _, q := range []*[]*Stream{&e.acceptQ, &e.handlerQ} {
		if i := slices.Index(*q, st); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			st.handled = true
			e.repaySlot()
			return
		}
	}
}

// maybeFinish removes st once both directions ended and, for a peer stream,
// it was accepted or handled; a peer stream's slot then comes back.
func (e *Engine) maybeFinish(st *Stream) {
	if st.removed || st.flushing {
		return
	}
	ended := st.resetErr != nil || (st.finRecv && st.finSent)
	if !ended || (!st.local && !st.handled) {
		return
	}
	st.removed = true
	delete(e.streams, st.id)
	e.setWriteWaiting(st, false)
	e.unlink(st)
	st.rx.Release()
	if !st.local {
		e.grantSlot()
	}
	e.maybeDrained()
}

// maybeDrained ends a GOAWAY drain once no stream is left.
func (e *Engine) maybeDrained() {
	if e.err != nil || len(e.streams) > 0 || !(e.goawaySent || e.goawayRecv) {
		return
	}
	if e.goawaySent {
		e.die(&SessionError{Code: e.goawayCode}, false, false)
	} else {
		e.die(e.peerGoAway, false, false)
	}
}

// GoAway starts a graceful shutdown: GOAWAY(code) naming the last peer
// stream, no new streams either way, the session ends when the last stream
// does or at the drain deadline.
func (e *Engine) GoAway(code frame.ErrorCode, now time.Duration) {
	if e.err != nil || e.goawaySent {
		return
	}
	e.goawaySent, e.goawayCode = true, code
	e.urgent.push(ctrl{typ: frame.TypeGoAway, id: e.lastPeerID, arg: uint32(code)})
	e.drainBy = now + e.cfg.CloseTimeout
	e.wake()
	e.maybeDrained()
}

// Shutdown is Session.Close: every stream is reset locally (buffered
// received bytes stay readable), GOAWAY(NO_ERROR), then the close.
func (e *Engine) Shutdown(now time.Duration) {
	if e.err != nil {
		return
	}
	e.closeBy = now + e.cfg.CloseTimeout
	e.die(&SessionError{Code: frame.NoError, Err: ErrSessionClosed}, true, true)
}
