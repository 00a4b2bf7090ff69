package engine

import (
	"io"
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/frame"
)

// Stream is the engine's record of one stream: its windows, queues and
// state. The driver holds it (package mux keeps it inside its Stream
// handle) and passes it back to the Engine's calls; it has no methods that
// change state on their own.
type Stream struct {
	id        uint32
	wuPending uint32        // stream WINDOW_UPDATE credit not yet laid out
	created   time.Duration // engine clock
	rxBulkAt  time.Duration // engine clock at the last DATA of interactiveBytes or more (SharedCap); 0: none

	hdrs  map[string][]string
	bytes int64 // payload exchanged both ways (rapid-reset accounting)

	rx    flow.Receiver
	rxq   chunkQueue
	rdBuf []byte // a waiting Read's buffer: DATA is copied to rdBuf[len:cap], len counts it

	tx       sendCredit
	txq      chunkQueue
	writeErr *StreamError // STOP_SENDING from the peer
	resetErr *StreamError // reset either way: both directions ended

	owner  any // the driver's handle (SetOwner); never looked at here
	next   *Stream
	inList int8
	ev     StreamEvents // events not yet taken (PopStreamEvent)

	// Flags, packed together (an idle stream's size matters: IdleStreams).
	local       bool // opened by us
	interactive bool
	finRecv     bool
	readClosed  bool
	lentAt      int32 // 1 + the slot of Engine.lent a Write on st lent its bytes in; 0: none
	sessWaiting bool  // a Write waits in Engine.sessWait
	wrWaiting   bool  // a Write came back short: it waits for room or credit
	finQueued   bool
	finSent     bool
	flushing    bool // reset locally; RST_STREAM (resetErr's code and reason) follows the queued bytes
	acked       bool // local: the peer's ACK arrived (or DATA did)
	ackImplied  bool // acked by DATA; the ACK itself may follow
	answered    bool // EvAnswered was emitted
	handled     bool // peer stream: accepted or its handler returned
	removed     bool // out of the session table
	wuQueued    bool
}

// ID returns the stream id.
func (st *Stream) ID() uint32 { return st.id }

// SetOwner records the driver's handle of st; Owner returns it.
func (st *Stream) SetOwner(h any) { st.owner = h }

// Owner returns what SetOwner recorded.
func (st *Stream) Owner() any { return st.owner }

// Headers returns the peer's headers (nil until they came).
func (st *Stream) Headers() map[string][]string { return st.hdrs }

// Answered reports whether EvAnswered was emitted for st.
func (st *Stream) Answered() bool { return st.answered }

// Accepted reports whether the peer accepted our stream (its ACK or DATA
// came).
func (st *Stream) Accepted() bool { return st.acked }

// ResetErr returns the reset that ended st, or nil.
func (st *Stream) ResetErr() *StreamError { return st.resetErr }

// Buffered returns the received bytes waiting for Read.
func (st *Stream) Buffered() int { return st.rxq.Len() }

// Lent reports whether a waiting Read's buffer is lent to st (Lend).
func (st *Stream) Lent() bool { return st.rdBuf != nil }

// answer emits EvAnswered once.
func (e *Engine) answer(st *Stream) {
	if !st.answered {
		st.answered = true
		e.emitStream(st, EvAnswered)
	}
}

// Read moves buffered bytes into p and returns their credit. With nothing
// buffered it returns the error Read ends with (io.EOF after a FIN...), or
// wait true: nothing to return yet.
func (e *Engine) Read(st *Stream, p []byte, now time.Duration) (n int, wait bool, err error) {
	if st.rxq.Len() > 0 {
		if len(p) == 0 {
			return 0, false, nil
		}
		n = st.rxq.read(p)
		e.consumed(st, n, now)
		if st.rxq.Len() > 0 {
			e.emitStream(st, EvReadable) // another reader may take the rest
		}
		return n, false, nil
	}
	if err := e.readErr(st); err != nil {
		return 0, false, err
	}
	return 0, len(p) > 0, nil
}

// Lend registers p as the buffer of the Read that waits on st: DATA that
// arrives meanwhile is copied straight into it. It reports false when
// another Read's buffer is lent already.
func (e *Engine) Lend(st *Stream, p []byte) bool {
	if st.rdBuf != nil {
		return false
	}
	st.rdBuf = p[:0:len(p)] // never past len(p): Read returns at most len(p) bytes
	return true
}

// Unlend takes the lent buffer back and returns how many bytes went into
// it (their credit returned).
func (e *Engine) Unlend(st *Stream, now time.Duration) int {
	n := len(st.rdBuf)
	st.rdBuf = nil
	if n > 0 {
		e.consumed(st, n, now)
		if st.rxq.Len() > 0 {
			e.emitStream(st, EvReadable) // the lent buffer filled: another reader may take the rest
		}
	}
	return n
}

// dropLent discards the bytes already copied into a lent buffer (the Read
// then returns none of them) and returns their count, for the caller to
// credit back with the receive buffer's.
func (st *Stream) dropLent() int {
	n := len(st.rdBuf)
	if st.rdBuf != nil {
		st.rdBuf = st.rdBuf[:0:0] // still lent (Unlend clears it), takes nothing more
	}
	return n
}

// readErr is the error Read returns once the buffer is empty.
func (e *Engine) readErr(st *Stream) error {
	switch {
	case st.readClosed:
		// CloseRead came first; the FIN or reset that answers its
		// STOP_SENDING does not change what Read reports.
		return ErrStreamClosed
	case st.finRecv:
		return io.EOF
	case st.resetErr != nil:
		return st.resetErr
	case e.err != nil:
		if Graceful(e.err) {
			return io.EOF
		}
		return e.err
	}
	return nil
}

// WriteErr returns the error a Write on st fails with, or nil.
func (e *Engine) WriteErr(st *Stream) error {
	switch {
	case st.resetErr != nil:
		return st.resetErr
	case st.writeErr != nil:
		return st.writeErr
	case st.finQueued:
		return ErrStreamClosed
	case e.err != nil:
		return e.err
	}
	return nil
}

// Write queues as much of p as the stream's credit and send buffer and the
// session's send buffer allow, and returns how much. queued reports that
// st became ready to send (the driver gets the bytes moving: a batch, or
// EvSend to its writer). n < len(p) with a nil error means Write must wait
// for EvWritable on st.
func (e *Engine) Write(st *Stream, p []byte) (n int, queued bool, err error) {
	if err := e.WriteErr(st); err != nil {
		return 0, false, err
	}
	q := st.txq.Len()
	room := min(st.tx.avail()-q, e.cfg.StreamSendBuffer-q, e.cfg.SessionSendBuffer-e.txQueued)
	if room > 0 {
		n = min(room, len(p))
		st.txq.write(p[:n])
		e.txQueued += n
		if st.inList == 0 {
			e.link(st)
			queued = true
		}
	}
	if n < len(p) {
		e.setWriteWaiting(st, true)
		if e.cfg.SessionSendBuffer-e.txQueued <= 0 && !st.sessWaiting {
			st.sessWaiting = true
			e.sessWait.push(st)
		}
	}
	return n, queued, nil
}

// LendWrite lends the engine p, the rest of a Write that came back short
// because the session's send buffer is full (st waits in sessWait), and
// reports whether it did: only while many Writes wait (crowded). As
// batches free room the engine queues from the lent bytes itself, Writes
// in the order they began waiting, and wakes the Write once: when all of p
// is queued, or when its stream's own room or credit ran out first (it
// waits for that then). Without it every freed batch woke writers that the
// running ones had beaten to the room: with 1024 streams about three
// wake-ups per 32 KiB Write, most for nothing. The Write must call
// UnlendWrite before it returns or touches p again.
func (e *Engine) LendWrite(st *Stream, p []byte) bool {
	if !st.sessWaiting || len(p) == 0 || !e.crowded() {
		return false
	}
	if n := len(e.lentFree); n > 0 {
		st.lentAt = e.lentFree[n-1] + 1
		e.lentFree = e.lentFree[:n-1]
	} else {
		e.lent = append(e.lent, nil)
		st.lentAt = int32(len(e.lent))
	}
	e.lent[st.lentAt-1] = p
	return true
}

// lentBytes returns what is left of the bytes a Write on st lent (nil: none).
func (e *Engine) lentBytes(st *Stream) []byte {
	if st.lentAt == 0 {
		return nil
	}
	return e.lent[st.lentAt-1]
}

// crowded reports whether so many Writes wait that the session's send
// buffer could not give each of them 16 KiB. Only then is lending worth it:
// with fewer, a woken Write finds room, and the engine copying their bytes
// on the writer's goroutine, under the session's lock, cost Streams64
// about 10 % (docs/performance-history.md, "Writes that lend their
// bytes").
func (e *Engine) crowded() bool {
	if e.cfg.lendAbove != 0 {
		return e.writesWaiting > e.cfg.lendAbove
	}
	return e.writesWaiting*(16<<10) > e.cfg.SessionSendBuffer
}

// UnlendWrite ends LendWrite's loan and returns how many of the lent bytes
// were not queued.
func (e *Engine) UnlendWrite(st *Stream) int {
	if st.lentAt == 0 {
		return 0
	}
	i := st.lentAt - 1
	n := len(e.lent[i])
	e.lent[i] = nil
	e.lentFree = append(e.lentFree, i)
	st.lentAt = 0
	return n
}

// roomCame wakes the Write that waits on st for its stream's room or
// credit, if one does: not one that waits for the session's send buffer
// (wakeSessionWaiters wakes those in turn), and nothing when no Write
// waits. With many streams most of these wake-ups would be spurious.
func (e *Engine) roomCame(st *Stream) {
	if st.wrWaiting && !st.sessWaiting {
		e.setWriteWaiting(st, false)
		e.emitStream(st, EvWritable)
	}
}

// StopWaiting says the Write that waited on st no longer does (it tries
// again, or gives up).
func (e *Engine) StopWaiting(st *Stream) {
	st.sessWaiting = false
	e.setWriteWaiting(st, false)
}

// setWriteWaiting records whether a Write waits on st, keeping the
// session's count of waiting Writes (SoleSender).
func (e *Engine) setWriteWaiting(st *Stream, w bool) {
	if st.wrWaiting == w {
		return
	}
	st.wrWaiting = w
	if w {
		e.writesWaiting++
	} else {
		e.writesWaiting--
	}
}

// CloseWrite ends our direction of st: a FIN follows the queued bytes.
func (e *Engine) CloseWrite(st *Stream) {
	if st.finQueued || st.resetErr != nil || e.err != nil {
		return
	}
	st.finQueued = true
	e.link(st)
	e.wake()
	e.emitStream(st, EvWritable)
}

// CloseRead ends our receive direction: STOP_SENDING asks the peer to
// stop, buffered bytes are discarded and credited back.
func (e *Engine) CloseRead(st *Stream, now time.Duration) {
	if st.readClosed || st.finRecv || st.resetErr != nil || e.err != nil {
		return
	}
	st.readClosed = true
	if n := st.rxq.Len() + st.dropLent(); n > 0 {
		st.rxq.reset()
		e.consumed(st, n, now)
	}
	e.urgent.push(ctrl{typ: frame.TypeStopSending, id: st.id, arg: uint32(frame.Cancel)})
	e.wake()
	e.emitStream(st, EvReadable)
}

// Reset aborts both directions of st with code; bytes already queued are
// sent first, as far as credit allows.
func (e *Engine) Reset(st *Stream, code frame.ErrorCode, now time.Duration) {
	if st.removed && st.resetErr == nil {
		return // ended cleanly both ways already
	}
	e.resetStream(st, code, "", now, true)
}

// SetInteractive puts st's data in the interactive class.
func (e *Engine) SetInteractive(st *Stream, on bool) { st.interactive = on }

// LentBytes returns how many bytes went into the lent buffer so far.
func (st *Stream) LentBytes() int { return len(st.rdBuf) }
