package engine

import (
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
)

// streamList is an intrusive FIFO of streams ready to send (Stream.next).
type streamList struct {
	head, tail *Stream
}

// sendable reports whether st has a frame the scheduler could send now
// (session credit aside): queued bytes with stream credit, or a bare FIN.
func (st *Stream) sendable() bool {
	if st.finSent || (st.resetErr != nil && !st.flushing) {
		return false
	}
	q := st.txq.Len()
	if q == 0 {
		return st.finQueued && !st.flushing
	}
	return st.tx.avail() > 0
}

// link puts st at the tail of its class if it has something to send.
func (e *Engine) link(st *Stream) {
	if st.inList != 0 || !st.sendable() {
		return
	}
	cls := 1
	if st.interactive || st.txq.Len() < interactiveBytes {
		cls = 0
	}
	l := &e.lists[cls]
	st.inList = int8(cls + 1)
	st.next = nil
	if l.tail == nil {
		l.head, l.tail = st, st
	} else {
		l.tail.next = st
		l.tail = st
	}
}

// SoleSender reports whether st is the only stream sending: the only one
// with DATA ready to send, and no other stream's Write waits for room or
// credit (streams held back by flow control are still sending).
func (e *Engine) SoleSender(st *Stream) bool {
	a, b := &e.lists[0], &e.lists[1]
	alone := a.head == st && a.tail == st && b.head == nil ||
		b.head == st && b.tail == st && a.head == nil
	waiting := e.writesWaiting
	if st.wrWaiting {
		waiting--
	}
	return alone && waiting == 0
}

// unlink takes st off its list (O(n) in the list: only on resets).
func (e *Engine) unlink(st *Stream) {
	if st.inList == 0 {
		return
	}
	l := &e.lists[st.inList-1]
	st.inList = 0
	var prev *Stream
	for s := l.head; s != nil; prev, s = s, s.next {
		if s != st {
			continue
		}
		if prev == nil {
			l.head = s.next
		} else {
			prev.next = s.next
		}
		if l.tail == s {
			l.tail = prev
		}
		break
	}
	st.next = nil
}

// popFront takes the head of list cls.
func (e *Engine) popFront(cls int) *Stream {
	l := &e.lists[cls]
	st := l.head
	l.head = st.next
	if l.head == nil {
		l.tail = nil
	}
	st.next, st.inList = nil, 0
	return st
}

// flushDone reports whether a closing session has nothing more it could
// send: its GOAWAY is out and no data can move.
func (e *Engine) flushDone() bool {
	if !e.urgent.empty() {
		return false
	}
	if !e.flushing || !e.gotSettings {
		return true
	}
	for _, st := range e.streams {
		if st.txq.Len() > 0 || (st.finQueued && !st.finSent && st.resetErr == nil) {
			return false // more may go once the peer grants credit
		}
	}
	e.flushing = false
	return true
}

// batchLimit is the largest batch payload: MaxBatch and the peer's message
// size, whichever is smaller.
func (e *Engine) batchLimit() int {
	return min(e.cfg.MaxBatch, e.peerMaxMsg)
}

// appendBatch lays out everything ready, up to batchLimit bytes after
// dst's current length (the caller reserved the WebSocket header room in
// dst): the urgent queue (PING ACK, RST_STREAM, STOP_SENDING, GOAWAY, and
// our HEADERS SYN, which must precede any RST_STREAM of its stream), then
// the credit queue (WINDOW_UPDATE, MAX_STREAMS, HEADERS ACK), then DATA
// (only once the peer's SETTINGS arrived) scheduled
// round-robin (one frame of at most the peer's MaxDataPayload per visit: a
// deficit round-robin whose quantum is one frame, since DATA splits
// anywhere) over ready streams, the interactive class first with an aging
// rule so bulk is never starved. Headers ACKs laid out are recorded in
// ackedList.
func (e *Engine) appendBatch(dst []byte, now time.Duration) []byte {
	// The preface, when the caller just laid it out in dst, is part of
	// this message and counts against the peer's MaxMessageSize.
	start := max(len(dst)-e.prefaceLen, 0)
	e.prefaceLen = 0
	if e.rs.suspended {
		return dst // no connection: nothing goes out until Resume
	}
	if e.rs.replaying() {
		// A resumed session sends again what the peer did not get,
		// one retained message per batch, before anything new.
		e.lastSend = now
		return e.rs.appendReplay(dst)
	}
	if e.rs.prefaceOwed {
		e.rs.prefaceOwed = false
		start = len(dst)
		dst = e.appendSettings(dst)
		e.prefaceLen = 0
	}
	limit := start + e.batchLimit()
	frames := 0
	for !e.urgent.empty() {
		ent := e.urgent.front()
		if len(dst) > start && len(dst)+frame.HeaderSize+ent.size() > limit {
			break
		}
		dst = e.appendCtrl(dst, ent)
		frames++
		if ent.peer {
			e.peerUrg--
		}
		if ent.typ == frame.TypePing && ent.flags == frame.FlagACK {
			e.pingAcks--
		}
		e.urgent.pop()
	}
	if e.err != nil {
		if e.flushing && e.urgent.empty() {
			dst, frames = e.appendCredit(dst, start, limit, frames)
			if e.credit.empty() && e.gotSettings {
				dst, frames = e.appendData(dst, limit, frames, now)
			}
		}
	} else if e.urgent.empty() {
		dst, frames = e.appendCredit(dst, start, limit, frames)
		if e.credit.empty() && e.gotSettings {
			// No DATA before the peer's SETTINGS: its windows may be
			// smaller than the defaults.
			dst, frames = e.appendData(dst, limit, frames, now)
		}
	}
	if len(dst) > start {
		e.lastSend = now
		e.stats.FramesOut.Add(uint64(frames))
		if e.rs.on {
			var segs []pool.Segment
			if e.splice != nil {
				segs = e.splice.segs
			}
			e.rs.retain(dst, start, segs)
		}
	}
	e.checkStall(now)
	return dst
}

// appendCredit lays out the credit queue (WINDOW_UPDATE, MAX_STREAMS,
// HEADERS ACK) as far as the batch allows.
func (e *Engine) appendCredit(dst []byte, start, limit, frames int) ([]byte, int) {
	if len(dst) == start || len(dst)+frame.HeaderSize <= limit {
		dst = e.appendReceived(dst)
	}
	for !e.credit.empty() {
		ent := e.credit.front()
		if len(dst) > start && len(dst)+frame.HeaderSize > limit {
			break
		}
		dst = e.appendCtrl(dst, ent)
		frames++
		e.credit.pop()
	}
	return dst, frames
}

func (e *ctrl) size() int {
	switch e.typ {
	case frame.TypeHeaders:
		return len(e.block)
	case frame.TypeRSTStream, frame.TypeGoAway:
		return len(e.text)
	}
	return 0
}

// appendCtrl appends one control frame. Entries that lost their purpose
// (a WINDOW_UPDATE or ACK for a stream that ended) append nothing.
func (e *Engine) appendCtrl(dst []byte, ent *ctrl) []byte {
	switch ent.typ {
	case frame.TypePing:
		return frame.AppendPing(dst, ent.flags == frame.FlagACK, ent.arg)
	case frame.TypeRSTStream:
		b, _ := frame.AppendRSTStream(dst, ent.id, frame.ErrorCode(ent.arg), ent.text)
		return b
	case frame.TypeStopSending:
		b, _ := frame.AppendStopSending(dst, ent.id, frame.ErrorCode(ent.arg))
		return b
	case frame.TypeGoAway:
		b, _ := frame.AppendGoAway(dst, ent.id, frame.ErrorCode(ent.arg), ent.text)
		return b
	case frame.TypeHeaders:
		st := ent.st
		if ent.flags == frame.FlagSYN {
			b, _ := frame.AppendHeadersBlock(dst, ent.id, frame.FlagSYN, ent.block)
			ent.block = nil
			return b
		}
		if st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendHeadersBlock(dst, ent.id, frame.FlagACK, nil)
		e.ackedList = append(e.ackedList, st)
		return b
	case frame.TypeWindowUpdate:
		if ent.st == nil {
			d := e.sessWU
			e.sessWU, e.sessWUQ = 0, false
			if d == 0 {
				return dst
			}
			b, _ := frame.AppendWindowUpdate(dst, 0, d)
			return b
		}
		st := ent.st
		d := st.wuPending
		st.wuPending, st.wuQueued = 0, false
		if d == 0 || st.removed || st.finRecv || st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendWindowUpdate(dst, st.id, d)
		return b
	case frame.TypeMaxStreams:
		e.maxStrDirty = false
		b, _ := frame.AppendMaxStreams(dst, e.granted)
		return b
	}
	return dst
}

// batchLen is the size of the batch laid out in dst so far, spliced bytes
// included.
func (e *Engine) batchLen(dst []byte) int {
	if e.splice != nil {
		return len(dst) + e.splice.n
	}
	return len(dst)
}

// appendData lays out DATA frames until the batch, the session credit or
// the ready streams run out.
func (e *Engine) appendData(dst []byte, limit, frames int, now time.Duration) ([]byte, int) {
	for {
		room := limit - e.batchLen(dst) - frame.HeaderSize
		if room <= 0 {
			break
		}
		cls := -1
		switch {
		case e.lists[0].head != nil && (e.lists[1].head == nil || e.iaRun < agingInteractive):
			cls = 0
			e.iaRun++
		case e.lists[1].head != nil:
			cls = 1
			e.iaRun = 0
		}
		if cls < 0 {
			break
		}
		st := e.lists[cls].head
		q := st.txq.Len()
		sc := e.sessSend.avail()
		if q > 0 && sc == 0 {
			// No session credit: only bare FINs can move.
			dst, frames = e.appendBareFins(dst, limit, frames)
			break
		}
		e.popFront(cls)
		if !st.sendable() {
			if st.flushing { // a reset waiting for data that cannot go
				e.finishFlush(st)
			}
			continue // relinked by a WINDOW_UPDATE
		}
		n := min(q, st.tx.avail(), e.peerMaxData, room, sc)
		if n < q && n == room && room < 1<<10 {
			e.link(st)
			break // leave a tiny remainder of the batch unused
		}
		if e.splice != nil {
			// A frame that ends where its chunk does lets the chunk go
			// out spliced, and realigns frames with chunks after a
			// short one.
			if r := st.txq.frontRun(); r < n && r >= minSplice {
				n = r
			}
		}
		fin := st.finQueued && !st.flushing && n == q
		dst, _ = frame.AppendDataHeader(dst, st.id, fin, n)
		if e.splice != nil {
			dst = st.txq.spliceTo(dst, n, e.splice)
		} else {
			dst = st.txq.appendTo(dst, n)
		}
		frames++
		st.tx.Consume(n)
		e.sessSend.Consume(n)
		e.txQueued -= n
		st.bytes += int64(n)
		if n > 0 {
			e.lastActivity = now
		}
		switch {
		case fin:
			st.finSent = true
			e.maybeFinish(st)
		case st.flushing && st.txq.Len() == 0:
			e.finishFlush(st)
		default:
			e.link(st)
		}
		e.roomCame(st)
	}
	if !e.sessWait.empty() {
		// Once per batch, not per frame: the writers woken find the
		// room of the whole batch, instead of one frame's each.
		e.wakeSessionWaiters()
	}
	return dst, frames
}

// appendBareFins sends the FINs of streams that have nothing else queued,
// which need no credit.
func (e *Engine) appendBareFins(dst []byte, limit, frames int) ([]byte, int) {
	for cls := range e.lists {
		for st := e.lists[cls].head; st != nil; {
			next := st.next
			if st.txq.Len() == 0 && st.finQueued && !st.flushing && e.batchLen(dst)+frame.HeaderSize <= limit {
				e.unlink(st)
				dst, _ = frame.AppendDataHeader(dst, st.id, true, 0)
				frames++
				st.finSent = true
				e.maybeFinish(st)
			}
			st = next
		}
	}
	return dst, frames
}

// wakeSessionWaiters gives the free session send-buffer room to the
// writers waiting for it, first come first served: a Write that lent its
// bytes (LendWrite) has them queued here and is woken once, when they are
// all queued or its stream can take no more; one that did not is woken to
// queue them itself, about as many as the free room can take (each is
// assumed to fill 64 KiB; those that find no room queue again).
func (e *Engine) wakeSessionWaiters() {
	wakeRoom := e.cfg.SessionSendBuffer - e.txQueued // for Writes that lent nothing
	for !e.sessWait.empty() && e.txQueued < e.cfg.SessionSendBuffer && wakeRoom > 0 {
		st := e.sessWait.peek()
		if !st.sessWaiting {
			e.sessWait.pop() // gave up (deadline, reset) meanwhile
			continue
		}
		if p := e.lentBytes(st); len(p) > 0 && e.WriteErr(st) == nil {
			k, _, _ := e.Write(st, p)
			p = p[k:]
			e.lent[st.lentAt-1] = p
			if len(p) > 0 && e.txQueued >= e.cfg.SessionSendBuffer {
				return // first in line for the next room
			}
			e.sessWait.pop()
			st.sessWaiting = false
			if len(p) > 0 {
				continue // its stream's room or credit ran out: roomCame wakes it
			}
			e.setWriteWaiting(st, false)
			e.emitStream(st, EvWritable)
			continue
		}
		e.sessWait.pop()
		st.sessWaiting = false
		e.emitStream(st, EvWritable)
		wakeRoom -= 64 << 10
	}
}
