package engine

import (
	"errors"
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/frame"
)

// The control frames a session queues (resets, acknowledgements, credit)
// and the credit it returns as the application reads.

// pushUrgent queues an urgent frame; peer-induced ones are bounded.
func (e *Engine) pushUrgent(ent ctrl) {
	if ent.peer {
		if e.peerUrg >= maxUrgent {
			e.fail(frame.EnhanceYourCalm, errors.New("urgent queue overflow: the peer does not read"))
			return
		}
		e.peerUrg++
	}
	e.urgent.push(ent)
	e.wake()
}

func (e *Engine) queueRST(id uint32, code frame.ErrorCode, reason string, peer bool) {
	e.pushUrgent(ctrl{typ: frame.TypeRSTStream, id: id, arg: uint32(code), text: TruncText(reason, frame.MaxReasonLen), peer: peer})
}

func (e *Engine) queueAck(st *Stream) {
	e.credit.push(ctrl{typ: frame.TypeHeaders, flags: frame.FlagACK, id: st.id, st: st})
	e.wake()
}

func (e *Engine) queueStreamWU(st *Stream, d uint32) {
	if d == 0 {
		return
	}
	st.wuPending += d
	if !st.wuQueued {
		st.wuQueued = true
		e.credit.push(ctrl{typ: frame.TypeWindowUpdate, id: st.id, st: st})
		e.wake()
	}
}

func (e *Engine) queueSessionWU(d uint32) {
	if d == 0 {
		return
	}
	e.sessWU += d
	if !e.sessWUQ {
		e.sessWUQ = true
		e.credit.push(ctrl{typ: frame.TypeWindowUpdate})
		e.wake()
	}
}

// grantSlot gives the peer one more stream.
func (e *Engine) grantSlot() {
	if e.goawaySent || e.err != nil || e.granted >= frame.MaxCredit {
		return
	}
	e.granted++
	if !e.maxStrDirty {
		e.maxStrDirty = true
		e.credit.push(ctrl{typ: frame.TypeMaxStreams})
		e.wake()
	}
}

// repaySlot grants back one slot of a stream refused for a full backlog
// (onSyn), now that a stream left the backlog.
func (e *Engine) repaySlot() {
	if e.owedSlots > 0 {
		e.owedSlots--
		e.grantSlot()
	}
}

// consumed returns the credit of n bytes the application read from st.
func (e *Engine) consumed(st *Stream, n int, now time.Duration) {
	if e.err != nil {
		return
	}
	if !st.removed && !st.finRecv && st.resetErr == nil {
		before := st.rx.Window()
		// Auto-tune only on reads that drained the buffer. While the
		// application is what holds data back, reading a full buffer at
		// memory speed says nothing about the path, and a larger window
		// would only lengthen the queue in the socket buffers ahead of the
		// session's other streams (head-of-line latency).
		rtt := e.srtt
		if st.rxq.Len() > 0 {
			rtt = 0
		}
		lim := e.shared.Limit(now, e.minRTT)
		st.rx.SetLimit(lim)
		sess := e.shared.SessionCap(now, e.minRTT, manyWindow)
		e.sessRecv.SetLimit(flow.SessionLimit(sess, uint32(max(e.cfg.InitialSessionWindow, sharedSessionFloor))))
		e.queueStreamWU(st, st.rx.Consume(n, now, rtt))
		if w := st.rx.Window(); w > before && w > e.largestWin {
			e.largestWin = w
			e.queueSessionWU(e.sessRecv.EnsureWindow(2 * w))
		}
	}
	e.queueSessionWU(e.sessRecv.Consume(n, now, e.srtt))
}

// sendCredit is the credit the peer granted us (flow.Sender: grants,
// and the debt a lowered initial window leaves).
type sendCredit struct {
	flow.Sender
}

// avail returns the bytes that may be sent now.
func (s *sendCredit) avail() int { return int(min(s.Available(), 1<<30)) }
