package engine

import (
	"errors"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// The calls a driver makes for the session as a whole: opening, accepting
// and handling streams, pings, shutdown, and what its transport saw.

// Err returns the error that ended the session, or nil while it runs.
func (e *Engine) Err() *SessionError { return e.err }

// Failed reports whether the session ended on a violation we detected
// (the driver may log it).
func (e *Engine) Failed() bool { return e.failed }

// OpenState tells whether a local stream may be opened now: nil and true
// yes; nil and false: wait for EvCredit; an error: never (the session
// ended, or a GOAWAY was sent or received: ErrGoAway).
func (e *Engine) OpenState() (bool, error) {
	if e.err != nil {
		return false, e.err
	}
	if e.goawaySent || e.goawayRecv {
		return false, ErrGoAway
	}
	return e.canOpen(), nil
}

// PeerBlockLimits are the limits of the header blocks the peer accepts.
func (e *Engine) PeerBlockLimits() *frame.BlockLimits { return &e.peerBlock }

// Open opens the next local stream with an encoded header block (OpenState
// must have said yes).
func (e *Engine) Open(block []byte, now time.Duration) *Stream {
	st := e.newStream(e.nextID, true, now)
	e.nextID += 2
	e.lastActivity = now
	e.stats.StreamsOpened.Add(1)
	e.urgent.push(ctrl{typ: frame.TypeHeaders, flags: frame.FlagSYN, id: st.id, st: st, block: block})
	e.wake()
	if e.canOpen() {
		e.emit(EvCredit) // let the next opener in
	}
	return st
}

// Accept takes the next peer stream of the accept queue, or nil.
func (e *Engine) Accept() *Stream {
	if len(e.acceptQ) == 0 {
		return nil
	}
	st := e.acceptQ[0]
	copy(e.acceptQ, e.acceptQ[1:])
	e.acceptQ[len(e.acceptQ)-1] = nil
	e.acceptQ = e.acceptQ[:len(e.acceptQ)-1]
	e.repaySlot()
	if len(e.acceptQ) > 0 {
		e.emit(EvAccept)
	}
	st.handled = true
	e.maybeFinish(st)
	return st
}

// HandlersWaiting returns the peer streams waiting for a handler.
func (e *Engine) HandlersWaiting() int { return len(e.handlerQ) }

// TakeHandler takes the next peer stream waiting for a handler, or nil.
// Once the session ended the queue is dropped instead.
func (e *Engine) TakeHandler() *Stream {
	if e.err != nil {
		for _, st := range e.handlerQ {
			st.handled = true
			e.answer(st)
		}
		clear(e.handlerQ)
		e.handlerQ = e.handlerQ[:0]
	}
	if len(e.handlerQ) == 0 {
		return nil
	}
	st := e.handlerQ[0]
	copy(e.handlerQ, e.handlerQ[1:])
	e.handlerQ[len(e.handlerQ)-1] = nil
	e.handlerQ = e.handlerQ[:len(e.handlerQ)-1]
	e.repaySlot()
	return st
}

// HandlerDone records a handler's answer for st: nil accepts it (the ACK
// goes out), an error refuses it with RST_STREAM (REFUSED_STREAM, or the
// code and reason of a *StreamError).
func (e *Engine) HandlerDone(st *Stream, err error, now time.Duration) {
	st.handled = true
	if e.err == nil {
		if err == nil {
			if st.resetErr == nil {
				e.queueAck(st)
			}
		} else {
			code := frame.RefusedStream
			reason := ""
			var se *StreamError
			if errors.As(err, &se) {
				code, reason = se.Code, se.Reason
			}
			e.resetStream(st, code, reason, now, false)
		}
	}
	if e.err != nil {
		e.answer(st)
	}
	e.maybeFinish(st)
}

// Ping queues a PING unless one is outstanding (or the PING budget makes
// it wait; it then goes out when a token comes). EvPong follows its answer.
func (e *Engine) Ping(now time.Duration) {
	if !e.pingOut {
		e.sendPing(now)
	}
}

// ReceivingMany reports whether DATA came for different streams in turn
// within the last manyWindow before now: several streams are receiving.
func (e *Engine) ReceivingMany(now time.Duration) bool { return e.shared.Mixed(now, manyWindow) }

// LastRTT returns the last round-trip time measured by a PING.
func (e *Engine) LastRTT() time.Duration { return e.lastRTT }

// SetIdleTimeout sets the idle timeout, restarting its clock at now.
func (e *Engine) SetIdleTimeout(d, now time.Duration) {
	e.idleTimeout = d
	e.lastActivity = now
	e.wake()
}

// NumStreams returns the streams not yet ended both ways.
func (e *Engine) NumStreams() int { return len(e.streams) }

// Ready reports whether the session may send DATA (the peer's SETTINGS
// came) and has not ended.
func (e *Engine) Ready() bool { return e.err == nil && e.gotSettings }

// CloseBy returns the deadline of a closing session's flush (0: none).
func (e *Engine) CloseBy() time.Duration { return e.closeBy }

// Transport ends. The driver reports what its connection did; the session
// ends with the matching error.

// PeerClosed: the peer closed the WebSocket; normal: with a normal or
// going-away status (or none).
func (e *Engine) PeerClosed(normal bool, err error) {
	e.wsClosedByPeer = true
	if e.goawayRecv {
		e.die(&SessionError{Code: e.peerGoAway.Code, Remote: true, Err: err}, false, false)
		return
	}
	code := frame.NoError
	if !normal {
		code = frame.ProtocolError
	}
	if e.err == nil && code != frame.NoError {
		e.stats.CountError(code)
	}
	e.die(&SessionError{Code: code, Remote: true, Err: err}, false, false)
}

// ClosedByPeer reports whether the peer closed the WebSocket first.
func (e *Engine) ClosedByPeer() bool { return e.wsClosedByPeer }

// WebSocketViolation: the peer broke the WebSocket protocol; the close we
// send carries status.
func (e *Engine) WebSocketViolation(status uint16, err error) {
	e.wsCloseCode = status
	e.fail(frame.ProtocolError, err)
}

// CloseStatus returns the WebSocket close status a violation asked for (0:
// the one the session error maps to).
func (e *Engine) CloseStatus() uint16 { return e.wsCloseCode }

// ReadFailed: the connection failed on read (not a close): the session
// ends without a GOAWAY, with the peer's GOAWAY code if one came.
func (e *Engine) ReadFailed(err error) {
	e.noGoAway = true
	code := frame.InternalError
	if e.goawayRecv {
		code = e.peerGoAway.Code
	}
	e.die(&SessionError{Code: code, Remote: true, Err: err, lost: !e.goawayRecv}, false, false)
}

// WriteFailed: the connection failed on write: the session ends with code
// and nothing more is sent.
func (e *Engine) WriteFailed(code frame.ErrorCode, err error) {
	e.noGoAway = true
	if e.err == nil {
		e.stats.CountError(code)
	}
	e.die(&SessionError{Code: code, Err: err, lost: code == frame.InternalError}, false, false)
}

// SessionBuffered returns the received bytes the session window still
// counts as unread.
func (e *Engine) SessionBuffered() int64 { return e.sessRecv.Buffered() }

// Splicing reports whether appendBatch splices send chunks (Config.Splice).
func (e *Engine) Splicing() bool { return e.splice != nil }
