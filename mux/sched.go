package mux

import (
	"time"

	"github.com/wsmux/wsmux/frame"
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
func (c *core) link(st *Stream) {
	if st.inList != 0 || !st.sendable() {
		return
	}
	cls := 1
	if st.interactive || st.txq.Len() < interactiveBytes {
		cls = 0
	}
	l := &c.lists[cls]
	st.inList = int8(cls + 1)
	st.next = nil
	if l.tail == nil {
		l.head, l.tail = st, st
	} else {
		l.tail.next = st
		l.tail = st
	}
}

// unlink takes st off its list (O(n) in the list: only on resets).
func (c *core) unlink(st *Stream) {
	if st.inList == 0 {
		return
	}
	l := &c.lists[st.inList-1]
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
func (c *core) popFront(cls int) *Stream {
	l := &c.lists[cls]
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
func (c *core) flushDone() bool {
	if !c.urgent.empty() {
		return false
	}
	if !c.flushing || !c.gotSettings {
		return true
	}
	for _, st := range c.streams {
		if st.txq.Len() > 0 || (st.finQueued && !st.finSent && st.resetErr == nil) {
			return false // more may go once the peer grants credit
		}
	}
	c.flushing = false
	return true
}

// batchLimit is the largest batch payload: MaxBatch and the peer's message
// size, whichever is smaller.
func (c *core) batchLimit() int {
	return min(c.cfg.MaxBatch, c.peerMaxMsg)
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
func (c *core) appendBatch(dst []byte, now time.Duration) []byte {
	// The preface, when the caller just laid it out in dst, is part of
	// this message and counts against the peer's MaxMessageSize.
	start := max(len(dst)-c.prefaceLen, 0)
	c.prefaceLen = 0
	limit := start + c.batchLimit()
	frames := 0
	for !c.urgent.empty() {
		e := c.urgent.front()
		if len(dst) > start && len(dst)+frame.HeaderSize+e.size() > limit {
			break
		}
		dst = c.appendCtrl(dst, e)
		frames++
		if e.peer {
			c.peerUrg--
		}
		if e.typ == frame.TypePing && e.flags == frame.FlagACK {
			c.pingAcks--
		}
		c.urgent.pop()
	}
	if c.err != nil {
		if c.flushing && c.urgent.empty() {
			dst, frames = c.appendCredit(dst, start, limit, frames)
			if c.credit.empty() && c.gotSettings {
				dst, frames = c.appendData(dst, limit, frames, now)
			}
		}
	} else if c.urgent.empty() {
		dst, frames = c.appendCredit(dst, start, limit, frames)
		if c.credit.empty() && c.gotSettings {
			// No DATA before the peer's SETTINGS: its windows may be
			// smaller than the defaults.
			dst, frames = c.appendData(dst, limit, frames, now)
		}
	}
	if len(dst) > start {
		c.lastSend = now
		c.stats.framesOut.Add(uint64(frames))
	}
	c.checkStall(now)
	return dst
}

// appendCredit lays out the credit queue (WINDOW_UPDATE, MAX_STREAMS,
// HEADERS ACK) as far as the batch allows.
func (c *core) appendCredit(dst []byte, start, limit, frames int) ([]byte, int) {
	for !c.credit.empty() {
		e := c.credit.front()
		if len(dst) > start && len(dst)+frame.HeaderSize > limit {
			break
		}
		dst = c.appendCtrl(dst, e)
		frames++
		c.credit.pop()
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
func (c *core) appendCtrl(dst []byte, e *ctrl) []byte {
	switch e.typ {
	case frame.TypePing:
		return frame.AppendPing(dst, e.flags == frame.FlagACK, e.arg)
	case frame.TypeRSTStream:
		b, _ := frame.AppendRSTStream(dst, e.id, frame.ErrorCode(e.arg), e.text)
		return b
	case frame.TypeStopSending:
		b, _ := frame.AppendStopSending(dst, e.id, frame.ErrorCode(e.arg))
		return b
	case frame.TypeGoAway:
		b, _ := frame.AppendGoAway(dst, e.id, frame.ErrorCode(e.arg), e.text)
		return b
	case frame.TypeHeaders:
		st := e.st
		if e.flags == frame.FlagSYN {
			b, _ := frame.AppendHeadersBlock(dst, e.id, frame.FlagSYN, e.block)
			e.block = nil
			return b
		}
		if st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendHeadersBlock(dst, e.id, frame.FlagACK, nil)
		c.ackedList = append(c.ackedList, st)
		return b
	case frame.TypeWindowUpdate:
		if e.st == nil {
			d := c.sessWU
			c.sessWU, c.sessWUQ = 0, false
			if d == 0 {
				return dst
			}
			b, _ := frame.AppendWindowUpdate(dst, 0, d)
			return b
		}
		st := e.st
		d := st.wuPending
		st.wuPending, st.wuQueued = 0, false
		if d == 0 || st.removed || st.finRecv || st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendWindowUpdate(dst, st.id, d)
		return b
	case frame.TypeMaxStreams:
		c.maxStrDirty = false
		b, _ := frame.AppendMaxStreams(dst, c.granted)
		return b
	}
	return dst
}

// batchLen is the size of the batch laid out in dst so far, spliced bytes
// included.
func (c *core) batchLen(dst []byte) int {
	if c.splice != nil {
		return len(dst) + c.splice.n
	}
	return len(dst)
}

// appendData lays out DATA frames until the batch, the session credit or
// the ready streams run out.
func (c *core) appendData(dst []byte, limit, frames int, now time.Duration) ([]byte, int) {
	for {
		room := limit - c.batchLen(dst) - frame.HeaderSize
		if room <= 0 {
			break
		}
		cls := -1
		switch {
		case c.lists[0].head != nil && (c.lists[1].head == nil || c.iaRun < agingInteractive):
			cls = 0
			c.iaRun++
		case c.lists[1].head != nil:
			cls = 1
			c.iaRun = 0
		}
		if cls < 0 {
			break
		}
		st := c.lists[cls].head
		q := st.txq.Len()
		sc := c.sessSend.avail()
		if q > 0 && sc == 0 {
			// No session credit: only bare FINs can move.
			dst, frames = c.appendBareFins(dst, limit, frames)
			break
		}
		c.popFront(cls)
		if !st.sendable() {
			if st.flushing { // a reset waiting for data that cannot go
				c.finishFlush(st)
			}
			continue // relinked by a WINDOW_UPDATE
		}
		n := min(q, st.tx.avail(), c.peerMaxData, room, sc)
		if n < q && n == room && room < 1<<10 {
			c.link(st)
			break // leave a tiny remainder of the batch unused
		}
		if c.splice != nil {
			// A frame that ends where its chunk does lets the chunk go
			// out spliced, and realigns frames with chunks after a
			// short one.
			if r := st.txq.frontRun(); r < n && r >= minSplice {
				n = r
			}
		}
		fin := st.finQueued && !st.flushing && n == q
		dst, _ = frame.AppendDataHeader(dst, st.id, fin, n)
		if c.splice != nil {
			dst = st.txq.spliceTo(dst, n, c.splice)
		} else {
			dst = st.txq.appendTo(dst, n)
		}
		frames++
		st.tx.Consume(n)
		c.sessSend.Consume(n)
		c.txQueued -= n
		st.bytes += int64(n)
		if n > 0 {
			c.lastActivity = now
		}
		switch {
		case fin:
			st.finSent = true
			c.maybeFinish(st)
		case st.flushing && st.txq.Len() == 0:
			c.finishFlush(st)
		default:
			c.link(st)
		}
		st.signalWrite()
	}
	if !c.sessWait.empty() {
		// Once per batch, not per frame: the writers woken find the
		// room of the whole batch, instead of one frame's each.
		c.wakeSessionWaiters()
	}
	return dst, frames
}

// appendBareFins sends the FINs of streams that have nothing else queued,
// which need no credit.
func (c *core) appendBareFins(dst []byte, limit, frames int) ([]byte, int) {
	for cls := range c.lists {
		for st := c.lists[cls].head; st != nil; {
			next := st.next
			if st.txq.Len() == 0 && st.finQueued && !st.flushing && c.batchLen(dst)+frame.HeaderSize <= limit {
				c.unlink(st)
				dst, _ = frame.AppendDataHeader(dst, st.id, true, 0)
				frames++
				st.finSent = true
				c.maybeFinish(st)
			}
			st = next
		}
	}
	return dst, frames
}

// wakeSessionWaiters wakes writers waiting for session send-buffer room,
// first come first served, about as many as the free room can take (each
// is assumed to fill 64 KiB; those that find no room queue again).
func (c *core) wakeSessionWaiters() {
	free := c.cfg.SessionSendBuffer - c.txQueued
	for free > 0 && !c.sessWait.empty() {
		st := c.sessWait.pop()
		if !st.sessWaiting {
			continue // gave up (deadline, reset) meanwhile
		}
		st.sessWaiting = false
		st.signalWrite()
		free -= 64 << 10
	}
}
