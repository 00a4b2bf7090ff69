package engine

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
